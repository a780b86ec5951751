# ruff: noqa: RUF001, RUF002, RUF003 - IPA symbols look like Latin letters and punctuation
"""IPA as clients write it for `<phoneme>` and lexicon phoneme rules: checked against the IPA's
symbols before an engine sees it, and put in the phoneme blocks engines take.

Only IPA symbols may go in a block: a stray `]` would end it early, and an ASCII stand-in (`'`
for stress) is read by no engine as meant.
"""

from __future__ import annotations

import unicodedata

# The IPA chart (2020), with ASCII "g" (everyone types it for "ɡ"), the affricate ligatures
# people still write, and the symbols espeak-ng writes: "ᵻ", "ᵿ", "ɚ", "ɝ".
_LETTERS = (
    "pbtdʈɖcɟkɡgqɢʔmɱnɳɲŋɴʙrʀⱱɾɽɸβfvθðszʃʒʂʐçʝxɣχʁħʕhɦɬɮʋɹɻjɰlɭʎʟ"
    "ʘǀǃǂǁɓɗʄɠʛ"
    "ʍwɥʜʢʡɕʑɺɧɫ"
    "iyɨʉɯuɪʏʊeøɘɵɤoəɛœɜɞʌɔæɐaɶɑɒɚɝᵻᵿ"
    "ʧʤʦʣʨʥ"
)
# Modifier letters and signs that stand after a symbol.
_MODIFIERS = "ʼʰʲʷˠˤⁿˡ˞ʱᵊᶿˣ"
# Suprasegmentals and tone letters.
_SUPRASEGMENTALS = "ˈˌːˑ.‿|‖˥˦˧˨˩ꜛꜜ↗↘"
# Combining diacritics, checked after NFD ("ç" is "c" and a cedilla).
_DIACRITICS = (
    "\u0325\u030a\u032c\u0339\u031c\u031f\u0320\u0308\u033d\u0329\u030d\u032f\u0311\u0324"
    "\u0330\u033c\u0334\u031d\u031e\u0318\u0319\u032a\u033a\u033b\u0303\u031a\u0361\u035c"
    "\u030b\u0301\u0304\u0300\u030f\u030c\u0302\u0306\u0327"
)
SYMBOLS = frozenset(_LETTERS + _MODIFIERS + _SUPRASEGMENTALS + _DIACRITICS + " ")

# What people type instead of an IPA symbol, and the symbol they mean.
_STAND_INS = {"'": "ˈ (U+02C8)", ":": "ː (U+02D0)", ",": "ˌ (U+02CC)", "G": "ɡ"}


class InvalidIpa(ValueError):
    """IPA with a symbol outside the inventory, or none at all; the message names the symbol."""


def check_ipa(ipa: str) -> str:
    """`ipa` trimmed, without enclosing slashes or brackets (`/təˈmɑːtoʊ/`); raises `InvalidIpa`
    for a symbol that is not IPA."""
    text = ipa.strip()
    if len(text) >= 2 and (text[0], text[-1]) in (("/", "/"), ("[", "]")):
        text = text[1:-1].strip()
    if not text:
        raise InvalidIpa("the IPA is empty")
    for symbol in unicodedata.normalize("NFD", text):
        if symbol in SYMBOLS:
            continue
        name = unicodedata.name(symbol, f"U+{ord(symbol):04X}")
        hint = f"; for IPA write {_STAND_INS[symbol]}" if symbol in _STAND_INS else ""
        raise InvalidIpa(f"{symbol!r} ({name}) is not an IPA symbol{hint}")
    return text


def phoneme_block(ipa: str) -> str:
    return f"[[ {ipa} ]]"
