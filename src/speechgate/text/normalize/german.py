"""German: numbers ("1.299,99", "3,5"), ordinals ("am 3. Dezember"), money ("5,20 €"), dates
("2. Dezember 2026", "02.12.2026") and times ("14:30 Uhr")."""

from __future__ import annotations

import re

from speechgate.text.normalize import number_words as nw
from speechgate.text.normalize.european import Words, rules
from speechgate.text.normalize.scan import Context, Rule, word_after, word_before

MONTHS = (
    "Januar",
    "Februar",
    "März",
    "April",
    "Mai",
    "Juni",
    "Juli",
    "August",
    "September",
    "Oktober",
    "November",
    "Dezember",
)
# After these an ordinal takes "-en" ("am dritten"), after an article "-e" ("der dritte"),
# elsewhere "-er" ("dritter Dezember", as a date stands alone).
_DATIVE = frozenset(
    ["am", "im", "vom", "zum", "beim", "dem", "den", "des", "bis", "seit", "ab", "ans"]
)
_ARTICLE = frozenset(["der", "die", "das"])


def ordinal_after(number: int, before: str) -> str:
    if before in _DATIVE:
        return nw.ordinal(number, "de", "spellout-ordinal-n")
    if before in _ARTICLE:
        return nw.ordinal(number, "de", "spellout-ordinal")
    return nw.ordinal(number, "de", "spellout-ordinal-r")


def say_date(day: int, month: int, year: int | None, before: str) -> str:
    said = f"{ordinal_after(day, before)} {MONTHS[month - 1]}"
    return f"{said} {nw.year(year, 'de')}" if year is not None else said


def say_clock(hour: int, minute: int) -> str:
    hours = "ein" if hour == 1 else nw.cardinal(hour, "de")
    return f"{hours} Uhr" + (f" {nw.cardinal(minute, 'de')}" if minute else "")


def say_money(language: str, whole: int, cents: int, names: tuple[str, str, str, str]) -> str:
    one, many, minor_one, minor_many = names
    if not whole and cents:
        return f"{_amount(cents)} {minor_one if cents == 1 else minor_many}"
    said = f"{_amount(whole)} {one if whole == 1 else many}"
    return f"{said} {nw.cardinal(cents, 'de')}" if cents else said


def _amount(number: int) -> str:
    return nw.cardinal(number, "de", "spellout-cardinal-masculine")


_ORDINAL = re.compile(r"(?<![\w.,])(?P<number>\d{1,3})\.(?=\s+\w)")
_STARTERS = frozenset(
    [
        "Dann",
        "Die",
        "Der",
        "Das",
        "Ich",
        "Er",
        "Sie",
        "Es",
        "Wir",
        "Ihr",
        "Und",
        "Aber",
        "Danach",
        "Man",
    ]
)


def _ordinal(match: re.Match[str], context: Context) -> str | None:
    text = match.string
    before = word_before(text, match.start()).lower()
    after = word_after(text, match.end())
    # A period before a lower-case word cannot end a sentence ("Er wurde 3. im Rennen").
    if not (
        before in _DATIVE | _ARTICLE
        or after[:1].islower()
        or (after[:1].isupper() and after not in _STARTERS)
    ):
        return None
    return ordinal_after(int(match.group("number")), before)


WORDS = Words(
    language="de",
    months=MONTHS,
    currencies={
        "€": ("Euro", "Euro", "Cent", "Cent"),
        "EUR": ("Euro", "Euro", "Cent", "Cent"),
        "Euro": ("Euro", "Euro", "Cent", "Cent"),
        "$": ("Dollar", "Dollar", "Cent", "Cent"),
        "USD": ("Dollar", "Dollar", "Cent", "Cent"),
        "£": ("Pfund", "Pfund", "Penny", "Pence"),
        "CHF": ("Franken", "Franken", "Rappen", "Rappen"),
    },
    money=say_money,
    date=say_date,
    clock=say_clock,
    percent="Prozent",
    range_word="bis",
    group=".",
    before_noun="spellout-cardinal-masculine",
    one_masculine="ein",
    units={
        "km/h": ("Kilometer pro Stunde", "Kilometer pro Stunde"),
        "km": ("Kilometer", "Kilometer"),
        "kg": ("Kilogramm", "Kilogramm"),
        "°C": ("Grad Celsius", "Grad Celsius"),
        "m": ("Meter", "Meter"),
    },
    ordinal=Rule(_ORDINAL, _ordinal),
)
RULES = rules(WORDS)
