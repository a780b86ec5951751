# ruff: noqa: RUF001, RUF002 - IPA symbols look like Latin letters and punctuation
"""Phoneme blocks: `[[ <IPA> ]]` in an engine's text, spoken as those phonemes in place of words.

A lexicon's phoneme rule or SSML's `<phoneme>` becomes a block ("say [[ həˈloʊ ]] twice") for an
engine with `EngineInfo.phonemes`. This module finds blocks, says what IPA is, fits it to an
engine's symbols (`fit`), and cleans the text between blocks (`plain`), as espeak-ng would read
a stray IPA symbol by its name ("schwa" for "ə").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from speechgate.text import ipa as ipa_inventory
from speechgate.text.rewrite import Rewrite, RewriteBuilder

# A block ends at the first "]]" and is never nested: what is left over is a stray bracket.
_BLOCK = re.compile(r"\[\[([^\[\]]*)\]\]")
_STRAY_BRACKETS = re.compile(r"\[\[|\]\]")


@dataclass(frozen=True)
class Run:
    """Characters `start:end` of a text: a phoneme block, or ordinary text (`ipa` None)."""

    start: int
    end: int
    ipa: str | None = None

    @property
    def is_block(self) -> bool:
        return self.ipa is not None


def runs(text: str) -> list[Run]:
    """`text` as runs of ordinary text and phoneme blocks, in order, covering all of it."""
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
    return [match.span() for match in _BLOCK.finditer(text)]


def block(ipa: str) -> str:
    return ipa_inventory.phoneme_block(ipa)


IPA_SYMBOLS = ipa_inventory.SYMBOLS
"""Every character `is_ipa` accepts after NFD, a space included; shared with `text.ipa`."""

_VOWELS = "iyɨʉɯuɪʏʊeøɘɵɤoəɛœɜɞʌɔæɐaɶɑɒɚɝᵻᵿᵊ"

# Not sounds; an engine that has them ("." and "|") reads them as punctuation, a pause.
_NOT_SOUNDS = frozenset(".|‖‿\u0361\u035c")


def invalid_ipa_symbols(text: str) -> str:
    """The characters of `text` that are not IPA, each once, in order."""
    invalid: dict[str, None] = {}
    for char in text:
        if char not in IPA_SYMBOLS and not set(unicodedata.normalize("NFD", char)) <= IPA_SYMBOLS:
            invalid[char] = None
    return "".join(invalid)


def is_ipa(text: str) -> bool:
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
    """`ipa` in an engine's own symbols (`symbols`: IPA piece, "aɪ" say, -> its spelling).

    Read after NFD, left to right, the longest piece each time. A missing symbol becomes its
    first stand-in the engine has, else is dropped, as is a missing diacritic; syllable and
    group breaks and tie bars are always dropped.
    """
    table = {unicodedata.normalize("NFD", piece): spelled for piece, spelled in symbols.items()}
    text = unicodedata.normalize("NFD", ipa)
    fitted: list[str] = []
    position = 0
    while position < len(text):
        lengthened = bool(fitted) and fitted[-1].endswith("ː")
        if text[position] in _NOT_SOUNDS or (text[position] == "ː" and lengthened):
            # A stand-in may bring its own length mark ("ɝ" as "ɜː").
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
    """`ipa` with each stress mark moved from the syllable's start ("həˈloʊ") to before its
    vowel ("həlˈoʊ"), as espeak-ng writes it and Piper's and Kokoro's models were trained on."""
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
    """A character only IPA uses; "æ", "ð", "θ", "ŋ" and their kind are letters of ordinary
    orthographies too."""
    return "\u0250" <= char <= "\u02af" or char in "ˈˌːˑʰʱʲʷˠˤˡ˞ᵻᵿᵊ"


# Orthographies that espeak-ng reads with an IPA-only letter.
_WRITTEN = {"az": "ə"}


def unspeakable(text: str, language: str | None = None) -> list[tuple[int, int]]:
    """Spans of ordinary text a phonemizer must not be given: stray "[[" and "]]" and IPA-only
    characters, but a letter `language`'s orthography uses."""
    kept = _WRITTEN.get((language or "").split("-")[0].lower(), "")
    spans = [match.span() for match in _STRAY_BRACKETS.finditer(text)]
    spans += [(i, i + 1) for i, char in enumerate(text) if _is_ipa_only(char) and char not in kept]
    return sorted(spans)


def plain(text: str, language: str | None = None) -> Rewrite:
    """Ordinary text without what is `unspeakable`, mapped back to `text` by the `Rewrite`."""
    builder = RewriteBuilder(text)
    for start, end in unspeakable(text, language):
        builder.replace(start, end, "")
    return builder.build()
