"""Number words from CLDR's spell-out rules (unicode-rbnf), one engine per language.

The rules cover cardinals, ordinals (with German, French and Spanish genders and cases) and
years; signs, decimals and digit strings are composed here because the rules' own handling of
them does not read as people speak ("-3.5" and "3.14" in every language's own way).
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unicode_rbnf import RbnfEngine

_LOCK = threading.Lock()
_ENGINES: dict[str, RbnfEngine] = {}

DIGITS = {
    "en": ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"],
    "de": ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"],
    "fr": ["zéro", "un", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf"],
    "es": ["cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve"],
}
MINUS = {"en": "minus", "de": "minus", "fr": "moins", "es": "menos"}
PLUS = {"en": "plus", "de": "plus", "fr": "plus", "es": "más"}
POINT = {"en": "point", "de": "Komma", "fr": "virgule", "es": "coma"}


def engine(language: str) -> RbnfEngine:
    """The spell-out rules of `language` (a primary subtag), loaded once per process."""
    found = _ENGINES.get(language)
    if found is None:
        with _LOCK:
            found = _ENGINES.get(language)
            if found is None:
                # Imported here, so a process that never normalizes pays nothing.
                from unicode_rbnf import RbnfEngine

                found = RbnfEngine.for_language(language)
                _ENGINES[language] = found
    return found


@lru_cache(maxsize=4096)
def spell(number: int, language: str, ruleset: str) -> str:
    return engine(language).format_number(number, ruleset_names=[ruleset]).text


def cardinal(number: int, language: str = "en", ruleset: str | None = None) -> str:
    """`number` in words; negative numbers with the language's minus."""
    name = ruleset or _CARDINAL[language]
    if number < 0:
        return f"{MINUS[language]} {spell(-number, language, name)}"
    return spell(number, language, name)


def ordinal(number: int, language: str = "en", ruleset: str | None = None) -> str:
    return spell(number, language, ruleset or _ORDINAL[language])


def year(number: int, language: str = "en") -> str:
    """`number` read as a year ("nineteen ninety", "neunzehnhundertneunzig"); French says
    years as cardinals ("mille neuf cent quatre-vingt-dix")."""
    if language == "fr":
        return cardinal(number, language)
    return spell(number, language, "spellout-numbering-year")


def digits(text: str, language: str = "en") -> str:
    """Each digit of `text` as a word ("0199" -> "zero one nine nine"); other characters
    dropped."""
    names = DIGITS[language]
    return " ".join(names[int(c)] for c in text if c.isdigit())


def decimal(integer: str, fraction: str | None, language: str = "en", sign: str = "") -> str:
    """A number written as digits `integer` and `fraction` (or None), with `sign`. English and
    German read the fraction digit by digit, French and Spanish as a number."""
    words = cardinal(int(integer or "0"), language)
    if fraction:
        if language in ("fr", "es"):
            zeros = len(fraction) - len(fraction.lstrip("0"))
            rest = fraction.lstrip("0")
            tail = [DIGITS[language][0]] * zeros + ([cardinal(int(rest), language)] if rest else [])
            words += f" {POINT[language]} " + " ".join(tail)
        else:
            words += f" {POINT[language]} {digits(fraction, language)}"
    if sign == "-":
        return f"{MINUS[language]} {words}"
    if sign == "+":
        return f"{PLUS[language]} {words}"
    return words


# Counting forms: German "eins", Spanish "uno" standing alone; callers ask for a gendered rule
# set where a noun follows ("ein Euro", "un euro").
_CARDINAL = {
    "en": "spellout-cardinal",
    "de": "spellout-numbering",
    "fr": "spellout-numbering",
    "es": "spellout-numbering",
}
_ORDINAL = {
    "en": "spellout-ordinal",
    "de": "spellout-ordinal",
    "fr": "spellout-ordinal-masculine",
    "es": "spellout-ordinal-masculine",
}
