"""French: numbers ("1 299,99", "3,5"), ordinals ("1er", "3e"), money ("5,20 €"), dates
("2 décembre 2026", "02/12/2026") and times ("14h30", "14:30")."""

from __future__ import annotations

import re

from speechgate.text.normalize import number_words as nw
from speechgate.text.normalize.european import Words, rules
from speechgate.text.normalize.scan import Context, Rule

MONTHS = (
    "janvier",
    "février",
    "mars",
    "avril",
    "mai",
    "juin",
    "juillet",
    "août",
    "septembre",
    "octobre",
    "novembre",
    "décembre",
)


def say_date(day: int, month: int, year: int | None, before: str) -> str:
    days = "premier" if day == 1 else nw.cardinal(day, "fr")
    said = f"{days} {MONTHS[month - 1]}"
    return f"{said} {nw.year(year, 'fr')}" if year is not None else said


def say_clock(hour: int, minute: int) -> str:
    hours = nw.cardinal(hour, "fr", "spellout-cardinal-feminine")
    said = f"{hours} {'heure' if hour == 1 else 'heures'}"
    return f"{said} {nw.cardinal(minute, 'fr')}" if minute else said


def say_money(language: str, whole: int, cents: int, names: tuple[str, str, str, str]) -> str:
    one, many, minor_one, minor_many = names
    if not whole and cents:
        return f"{nw.cardinal(cents, 'fr')} {minor_one if cents == 1 else minor_many}"
    amount = nw.cardinal(whole, "fr", "spellout-cardinal-masculine")
    # "un million d'euros": a round million or more takes "de".
    name = one if whole == 1 else many
    said = (
        f"{amount} d'{name}"
        if whole >= 1_000_000 and whole % 1_000_000 == 0
        else (f"{amount} {name}")
    )
    return f"{said} {nw.cardinal(cents, 'fr')}" if cents else said


_ORDINAL = re.compile(r"(?<![\w.,])(?P<number>\d+)(?P<suffix>er|re|ère|e|ème|è)(?!\w)")


def _ordinal(match: re.Match[str], context: Context) -> str:
    number = int(match.group("number"))
    feminine = match.group("suffix") in ("re", "ère")
    if number == 1:
        return "première" if feminine else "premier"
    return nw.ordinal(number, "fr", "spellout-ordinal-masculine")


WORDS = Words(
    language="fr",
    months=MONTHS,
    currencies={
        "€": ("euro", "euros", "centime", "centimes"),
        "EUR": ("euro", "euros", "centime", "centimes"),
        "$": ("dollar", "dollars", "cent", "cents"),
        "USD": ("dollar", "dollars", "cent", "cents"),
        "£": ("livre", "livres", "penny", "pence"),
        "CHF": ("franc suisse", "francs suisses", "centime", "centimes"),
    },
    money=say_money,
    date=say_date,
    clock=say_clock,
    percent="pour cent",
    range_word="à",
    group=" \u00a0\u202f",
    before_noun="spellout-cardinal-masculine",
    one_masculine="un",
    units={
        "km/h": ("kilomètre par heure", "kilomètres par heure"),
        "km": ("kilomètre", "kilomètres"),
        "kg": ("kilogramme", "kilogrammes"),
        "°C": ("degré Celsius", "degrés Celsius"),
    },
    ordinal=Rule(_ORDINAL, _ordinal),
)
RULES = rules(WORDS)
