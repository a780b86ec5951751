"""Rules that German, French and Spanish share: numbers with a decimal comma, money, dates and
times; each language module gives its words (`Words`) and its own ordinals and clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from speechgate.text.normalize import number_words as nw
from speechgate.text.normalize.scan import EMOJI, Context, Rule, Say, word_after, word_before


@dataclass(frozen=True)
class Words:
    """A language's words for the shared rules."""

    language: str
    months: tuple[str, ...]
    # symbol or code: (one, many, minor one, minor many)
    currencies: dict[str, tuple[str, str, str, str]]
    # "fünf Euro zwanzig" / "cinq euros vingt" / "cinco euros con veinte céntimos"
    money: Callable[[str, int, int, tuple[str, str, str, str]], str]
    # (day, month, year or None, the word before the date) -> words
    date: Callable[[int, int, int | None, str], str]
    # (hour, minute) -> words
    clock: Callable[[int, int], str]
    percent: str
    range_word: str
    # The digit-group separators of a written number ("." in German, a space in French).
    group: str
    # Gendered "one" before a masculine currency name ("ein Euro", "un euro").
    one_masculine: str
    # The rule set for a count before a noun.
    before_noun: str
    units: dict[str, tuple[str, str]] = field(default_factory=dict)
    ordinal: Rule | None = None
    extra: tuple[Rule, ...] = ()


def number_pattern(group: str) -> str:
    return rf"(?:\d{{1,3}}(?:[{group}]\d{{3}})+|\d+)(?:,\d+)?"


def parse(text: str) -> tuple[str, str | None]:
    """A written number as integer digits and fraction digits (or None)."""
    integer, _, fraction = re.sub(r"[.\s\u00a0\u202f]", "", text).partition(",")
    return integer, fraction or None


def say_number(text: str, language: str, sign: str = "") -> str:
    integer, fraction = parse(text)
    if len(integer) > 1 and integer.startswith("0") and not fraction:
        return nw.digits(integer, language)
    return nw.decimal(integer, fraction, language, sign)


def month_number(word: str, months: tuple[str, ...]) -> int | None:
    word = word.rstrip(".").lower()
    for index, name in enumerate(months):
        if name.lower() == word or (len(word) >= 3 and name.lower().startswith(word)):
            return index + 1
    return None


def rules(words: Words) -> tuple[Rule, ...]:
    """The shared rules in priority order, with `words`' ordinals and extras among them."""
    language = words.language
    num = number_pattern(words.group)
    sign = r"(?<![\w.,])(?P<sign>[-−+])?"
    month_names = "|".join(words.months)
    month_short = "|".join(sorted({m[:3] for m in words.months} | {m[:4] for m in words.months}))
    month_word = rf"(?P<month>{month_names}|(?:{month_short})\.)"

    def iso(match: re.Match[str], context: Context) -> str | None:
        year, month, day = (int(g) for g in match.groups())
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
        return words.date(day, month, year, word_before(match.string, match.start()).lower())

    def numeric(match: re.Match[str], context: Context) -> str | None:
        day, month = int(match.group("day")), int(match.group("month"))
        year_text = match.group("year")
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
        year = None
        if year_text:
            year = int(year_text) if len(year_text) == 4 else 2000 + int(year_text)
        return words.date(day, month, year, word_before(match.string, match.start()).lower())

    def named(match: re.Match[str], context: Context) -> str | None:
        month = month_number(match.group("month"), words.months)
        day = int(match.group("day"))
        if month is None or not 1 <= day <= 31:
            return None
        year = int(match.group("year")) if match.group("year") else None
        return words.date(day, month, year, word_before(match.string, match.start()).lower())

    def time(match: re.Match[str], context: Context) -> str | None:
        hour = int(match.group("hour"))
        minute = int(match.group("minute") or match.group("minute2") or 0)
        if hour > 24:
            return None
        return words.clock(hour, minute)

    def money(match: re.Match[str], context: Context) -> str:
        groups = match.groupdict()
        unit = groups.get("symbol") or groups["after"]
        names = words.currencies[unit]
        amount = match.group("amount")
        negative = match.group("sign") in ("-", "−") or bool(match.group("sign2"))
        if groups.get("symbol") and re.fullmatch(r"\d+\.\d{2}", amount):
            amount = amount.replace(".", ",")  # "€5.20": a decimal point after the symbol
        integer, fraction = parse(amount)
        minus = nw.MINUS[language] + " " if negative else ""
        if fraction is not None and len(fraction) > 2:
            return f"{minus}{say_number(amount, language)} {names[1]}"
        cents = int(fraction.ljust(2, "0")) if fraction else 0
        return minus + words.money(words.language, int(integer or "0"), cents, names)

    def quantity(match: re.Match[str], context: Context) -> str | None:
        first, second, unit = match.group("first"), match.group("second"), match.group("unit")
        if second is None and unit is None:
            return None
        said = say_number(first, language, match.group("sign") or "")
        if second is not None:
            said += f" {words.range_word} {say_number(second, language)}"
        if unit:
            one, many = words.units.get(unit, (words.percent, words.percent))
            value = second or first
            said += f" {one if value == '1' else many}"
        return said

    def number(match: re.Match[str], context: Context) -> str:
        written, sign = match.group("number"), match.group("sign") or ""
        if "," not in written and word_after(match.string, match.end())[:1].isalpha():
            # Before a noun: German "ein Kind", Spanish "veintiún días".
            return (
                nw.cardinal(int(parse(written)[0]), language, words.before_noun)
                if not sign
                else (say_number(written, language, sign))
            )
        return say_number(written, language, sign)

    symbols = "|".join(re.escape(s) for s in sorted(words.currencies, key=len, reverse=True))
    units = "|".join(re.escape(u) for u in sorted([*words.units, "%"], key=len, reverse=True))
    amount = rf"(?P<sign2>[-−])?(?P<amount>\d+\.\d{{2}}(?!\d)|{num})"
    found: list[tuple[re.Pattern[str], Say]] = [
        (re.compile(r"(?<![\w./-])(\d{4})-(\d{2})-(\d{2})(?![\w/-]|\.\d)"), iso),
        (
            re.compile(
                r"(?<![\w./-])(?P<day>\d{1,2})([./])(?P<month>\d{1,2})\2(?P<year>\d{4}|\d{2})"
                r"(?![\w/]|[.,]\d)"
            ),
            numeric,
        ),
        (
            re.compile(
                rf"(?<![\w.])(?P<day>\d{{1,2}})(?:\.|er|re|ère|º|°)?\s(?:de\s)?{month_word}"
                rf"(?:,?\s(?:de\s)?(?P<year>\d{{4}})\b)?"
            ),
            named,
        ),
        (
            re.compile(
                r"(?<![\w:.,])(?P<hour>\d{1,2})(?::(?P<minute>[0-5]\d)(?:\s?(?:Uhr|h)\b)?"
                r"|h(?P<minute2>[0-5]\d)?\b|\s?Uhr\b)(?![\d:])"
            ),
            time,
        ),
        (re.compile(rf"{sign}(?P<symbol>{symbols})\s?{amount}(?![\d%])"), money),
        (re.compile(rf"{sign}{amount}\s?(?P<after>{symbols})(?!\w)"), money),
    ]
    shared = [Rule(pattern, say) for pattern, say in found]
    tail = [
        Rule(
            re.compile(
                rf"{sign}(?P<first>{num})(?:\s?[-–]\s?(?P<second>{num}))?"
                rf"(?:\s?(?P<unit>{units})(?![\w/]))?"
            ),
            quantity,
        ),
        Rule(re.compile(rf"{sign}(?P<number>{num})(?![\d])"), number),
    ]
    ordinal = [words.ordinal] if words.ordinal else []
    return (EMOJI, *shared, *ordinal, *words.extra, *tail)
