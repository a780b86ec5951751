# ruff: noqa: RUF001, RUF002 - IPA symbols look like Latin letters and punctuation
"""Phoneme blocks: `[[ <IPA> ]]` in an engine's text, spoken as those phonemes in place of words.

A lexicon's phoneme rule or SSML's `<phoneme alphabet="ipa">` becomes a block in the text an
engine is given ("say [[ həˈloʊ ]] twice"); an engine whose `EngineInfo.phonemes` is true speaks
the block's IPA and phonemizes the words around it itself. This module is the one place that
finds blocks (`runs`, `blocks`), says what IPA is (`is_ipa`, `invalid_ipa_symbols`: for
validating a rule before it is stored), fits IPA to the symbols an engine has (`fit`), and
cleans the text between blocks so a phonemizer never reads a stray bracket or IPA symbol by
its name (`plain`): espeak-ng, which phonemizes for Piper and Kokoro and speaks for itself,
says "schwa" for "ə" and "stress" for "ˈ".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from speechgate.text import ipa as ipa_inventory
from speechgate.text.rewrite import Rewrite, RewriteBuilder

# A block's content may hold no bracket, so "[[ a ]] b ]]" ends at the first "]]" and a block is
# never nested: what is left over is a stray bracket (see `plain`).
_BLOCK = re.compile(r"\[\[([^\[\]]*)\]\]")
_STRAY_BRACKETS = re.compile(r"\[\[|\]\]")


@dataclass(frozen=True)
class Run:
    """Characters `start:end` of a text: a phoneme block (`ipa` its content, stripped) or the
    ordinary text between blocks (`ipa` None)."""

    start: int
    end: int
    ipa: str | None = None

    @property
    def is_block(self) -> bool:
        return self.ipa is not None


def runs(text: str) -> list[Run]:
    """`text` as runs of ordinary text and phoneme blocks, in order, covering all of it (an
    empty text has no runs)."""
    found: list[Run] = []
    position = 0
    for match in _BLOCK.finditer(text):
        if match.start() > position:
            found.append(Run(position, match.start()))
        found.append(Run(match.start(), match.end(), match.group(1).strip()))
        position = match.end()
    if position < len(text):
        found.append(Run(position, len(text)))
    return found


def blocks(text: str) -> list[tuple[int, int]]:
    """The (start, end) character offsets of each phoneme block in `text`, brackets included."""
    return [match.span() for match in _BLOCK.finditer(text)]


def block(ipa: str) -> str:
    """The phoneme block that says `ipa` (which should pass `is_ipa`)."""
    return ipa_inventory.phoneme_block(ipa)


IPA_SYMBOLS = ipa_inventory.SYMBOLS
"""Every character `is_ipa` accepts (after canonical decomposition), a space included: it
separates the words of a block. One inventory with `speechgate.text.ipa`, which checks the IPA
of SSML and lexicons."""

# The vowels, where stress marks go (`stress_on_vowels`).
_VOWELS = "iyɨʉɯuɪʏʊeøɘɵɤoəɛœɜɞʌɔæɐaɶɑɒɚɝᵻᵿᵊ"

# Not sounds: a phoneme set without them loses nothing when they are dropped, and an engine that
# has them ("." and "|" are its punctuation, a pause) must not be given them as such.
_NOT_SOUNDS = frozenset(".|‖‿\u0361\u035c")


def invalid_ipa_symbols(text: str) -> str:
    """The characters of `text` that are not IPA, each once, in order of first appearance."""
    invalid: dict[str, None] = {}
    for char in text:
        if char not in IPA_SYMBOLS and not set(unicodedata.normalize("NFD", char)) <= IPA_SYMBOLS:
            invalid[char] = None
    return "".join(invalid)


def is_ipa(text: str) -> bool:
    """Whether `text` is IPA to speak: not blank, and every character an IPA symbol."""
    return bool(text.strip()) and not invalid_ipa_symbols(text)


STAND_INS: Mapping[str, tuple[str, ...]] = {
    "g": ("ɡ",),
    "ɡ": ("g",),
    "r": ("ɹ", "ɾ"),
    "ɹ": ("r",),
    "ɾ": ("t", "d"),
    "ɫ": ("l",),
    "ʍ": ("w",),
    "ɝ": ("ɜː", "ɚ", "ɜ"),
    "ɚ": ("əɹ", "ə"),
    "ɜ": ("ɜː", "ə"),
    "ɐ": ("ə", "a"),
    "ᵻ": ("ɪ", "ɨ"),
    "ᵿ": ("ʊ",),
    "ᵊ": ("ə",),
    "ɘ": ("ə",),
    "ɵ": ("ə", "o"),
    "ɨ": ("ɪ", "i"),
    "ʉ": ("u",),
    "ɒ": ("ɑ", "ɔ"),
    "ɑ": ("ɑː", "a", "ɒ"),
    "a": ("æ", "ɑ"),
    "æ": ("a", "ɛ"),
    "e": ("ɛ", "eɪ"),
    "ɛ": ("e",),
    "o": ("ɔ", "oʊ"),
    "ɔ": ("ɔː", "o", "ɒ"),
    "i": ("iː", "ɪ"),
    "u": ("uː", "ʊ"),
    "ʌ": ("ə",),
    "ʧ": ("tʃ",),
    "ʤ": ("dʒ",),
    "ʦ": ("ts",),
    "ʣ": ("dz",),
    "ʨ": ("tɕ", "tʃ"),
    "ʥ": ("dʑ", "dʒ"),
    "ʁ": ("ʀ", "r"),
    "ʀ": ("ʁ", "r"),
    "ɬ": ("l",),
    "ɱ": ("m",),
}
"""For an IPA symbol an engine lacks, the nearest sounds it may have instead, nearest first."""


def fit(ipa: str, symbols: Mapping[str, str]) -> list[str]:
    """`ipa` in an engine's own symbols: `symbols` maps each piece of IPA the engine takes (one
    symbol, or a sequence it has one symbol for: "aɪ", "tʃ") to its spelling of it.

    The rule: `ipa` is taken apart canonically (NFD: "ç" is "c" and a cedilla), and read left
    to right, each time the longest piece `symbols` has. A symbol it lacks becomes its first
    stand-in (`STAND_INS`) that the engine has whole; failing that it is dropped, and a diacritic
    it lacks is dropped too, leaving the letter it marks. Syllable breaks, group breaks and tie
    bars are no sounds and are always dropped ("." and "|" would be an engine's punctuation).
    """
    table = {unicodedata.normalize("NFD", piece): spelled for piece, spelled in symbols.items()}
    text = unicodedata.normalize("NFD", ipa)
    fitted: list[str] = []
    position = 0
    while position < len(text):
        lengthened = bool(fitted) and fitted[-1].endswith("ː")
        if text[position] in _NOT_SOUNDS or (text[position] == "ː" and lengthened):
            # A stand-in may bring its own length mark ("ɝ" as "ɜː"): the text's is then one
            # too many.
            position += 1
            continue
        length, spelled = _longest(text, position, table)
        if spelled is not None:
            fitted.append(spelled)
            position += length
            continue
        for stand_in in STAND_INS.get(text[position], ()):
            whole = _whole(stand_in, table)
            if whole is not None:
                fitted.extend(whole)
                break
        position += 1
    return fitted


def stress_on_vowels(ipa: str) -> str:
    """`ipa` with each stress mark moved on from the start of its syllable, where IPA writes it
    ("həˈloʊ"), to just before the syllable's vowel, where espeak-ng writes it ("həlˈoʊ"): the
    place Piper's and Kokoro's models saw it in training. A mark with no vowel after it in its
    word stays where it is."""
    chars = list(ipa)
    index = 0
    while index < len(chars):
        if chars[index] in "ˈˌ":
            target = index + 1
            while target < len(chars) and chars[target] not in _VOWELS and chars[target] != " ":
                target += 1
            if target < len(chars) and chars[target] in _VOWELS and target > index + 1:
                mark = chars.pop(index)
                chars.insert(target - 1, mark)
                index = target
                continue
        index += 1
    return "".join(chars)


def _longest(text: str, position: int, table: Mapping[str, str]) -> tuple[int, str | None]:
    longest = max(map(len, table), default=0)
    for length in range(min(longest, len(text) - position), 0, -1):
        spelled = table.get(text[position : position + length])
        if spelled is not None:
            return length, spelled
    return 0, None


def _whole(ipa: str, table: Mapping[str, str]) -> list[str] | None:
    """`ipa` in the table's symbols if all of it is there, else None."""
    spelled: list[str] = []
    position = 0
    while position < len(ipa):
        length, piece = _longest(ipa, position, table)
        if piece is None:
            return None
        spelled.append(piece)
        position += length
    return spelled


def _is_ipa_only(char: str) -> bool:
    """A character only IPA uses: a letter of the IPA Extensions block (U+0250-U+02AF), or a
    modifier IPA writes stress, length or a secondary articulation with. ASCII letters, "æ",
    "ð", "θ", "ŋ" and their kind are letters of ordinary orthographies too, and stay."""
    return "\u0250" <= char <= "\u02af" or char in "ˈˌːˑʰʱʲʷˠˤˡ˞ᵻᵿᵊ"


# The one IPA-only letter an orthography that espeak-ng reads uses: Azerbaijani's ə.
_WRITTEN = {"az": "ə"}


def unspeakable(text: str, language: str | None = None) -> list[tuple[int, int]]:
    """What a phonemizer must not be given of ordinary text (no phoneme blocks in it), as
    (start, end) spans in order: each stray "[[" and "]]" (espeak-ng takes "[[" as the start of
    phoneme input where that is on) and each IPA-only character (it would be read by its name:
    "ə" is "schwa"), but a letter `language`'s orthography uses."""
    kept = _WRITTEN.get((language or "").split("-")[0].lower(), "")
    spans = [match.span() for match in _STRAY_BRACKETS.finditer(text)]
    spans += [(i, i + 1) for i, char in enumerate(text) if _is_ipa_only(char) and char not in kept]
    return sorted(spans)


def plain(text: str, language: str | None = None) -> Rewrite:
    """Ordinary text without what is `unspeakable` in it; the `Rewrite` maps what is left back
    to `text`."""
    builder = RewriteBuilder(text)
    for start, end in unspeakable(text, language):
        builder.replace(start, end, "")
    return builder.build()
