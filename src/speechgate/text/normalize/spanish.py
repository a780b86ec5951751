"""Spanish: numbers ("1.299,99", "3,5"), ordinals ("3.º", "1.ª"), money ("5,20 €"), dates
("2 de diciembre de 2026", "02/12/2026") and times ("14:30")."""

from __future__ import annotations

import re

from speechgate.text.normalize import number_words as nw
from speechgate.text.normalize.european import Words, rules
from speechgate.text.normalize.scan import Context, Rule, word_after

MONTHS = (
    "enero",
    "febrero",
    "marzo",
    "abril",
    "mayo",
    "junio",
    "julio",
    "agosto",
    "septiembre",
    "octubre",
    "noviembre",
    "diciembre",
)


def say_date(day: int, month: int, year: int | None, before: str) -> str:
    said = f"{nw.cardinal(day, 'es')} de {MONTHS[month - 1]}"
    return f"{said} de {nw.year(year, 'es')}" if year is not None else said


def say_clock(hour: int, minute: int) -> str:
    hours = nw.cardinal(hour, "es", "spellout-cardinal-feminine")
    if not minute:
        return f"{hours} en punto"
    return f"{hours} y {nw.cardinal(minute, 'es')}"


def say_money(language: str, whole: int, cents: int, names: tuple[str, str, str, str]) -> str:
    one, many, minor_one, minor_many = names
    if not whole and cents:
        return f"{nw.cardinal(cents, 'es', 'spellout-cardinal-masculine')} " + (
            minor_one if cents == 1 else minor_many
        )
    amount = nw.cardinal(whole, "es", "spellout-cardinal-masculine")
    name = one if whole == 1 else many
    # "un millón de euros": a round million or more takes "de".
    said = (
        f"{amount} de {name}"
        if whole >= 1_000_000 and whole % 1_000_000 == 0
        else (f"{amount} {name}")
    )
    if not cents:
        return said
    minor = minor_one if cents == 1 else minor_many
    return f"{said} con {nw.cardinal(cents, 'es', 'spellout-cardinal-masculine')} {minor}"


_ORDINAL = re.compile(r"(?<![\w.,])(?P<number>\d+)\.?(?P<suffix>º|°|ª|er)(?!\w)")


def _ordinal(match: re.Match[str], context: Context) -> str:
    number = int(match.group("number"))
    suffix = match.group("suffix")
    if suffix == "ª":
        return nw.ordinal(number, "es", "spellout-ordinal-feminine")
    if suffix == "er" or word_after(match.string, match.end())[:1].isalpha():
        # Before a noun: "tercer lugar", "primer día".
        return nw.ordinal(number, "es", "spellout-ordinal-masculine-adjective")
    return nw.ordinal(number, "es", "spellout-ordinal-masculine")


WORDS = Words(
    language="es",
    months=MONTHS,
    currencies={
        "€": ("euro", "euros", "céntimo", "céntimos"),
        "EUR": ("euro", "euros", "céntimo", "céntimos"),
        "$": ("dólar", "dólares", "centavo", "centavos"),
        "USD": ("dólar", "dólares", "centavo", "centavos"),
        "£": ("libra", "libras", "penique", "peniques"),
    },
    money=say_money,
    date=say_date,
    clock=say_clock,
    percent="por ciento",
    range_word="a",
    group=".",
    before_noun="spellout-cardinal-masculine",
    one_masculine="un",
    units={
        "km/h": ("kilómetro por hora", "kilómetros por hora"),
        "km": ("kilómetro", "kilómetros"),
        "kg": ("kilogramo", "kilogramos"),
        "°C": ("grado Celsius", "grados Celsius"),
    },
    ordinal=Rule(_ORDINAL, _ordinal),
)
RULES = rules(WORDS)
