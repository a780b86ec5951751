"""SSML `<say-as>`: one token said as the markup asks, whatever the context would suggest."""

from __future__ import annotations

import re
from collections.abc import Callable

from speechgate.text.normalize import english, french, german, spanish
from speechgate.text.normalize import number_words as nw
from speechgate.text.normalize.scan import Context


class UnknownSayAs(ValueError):
    """An `interpret-as` value the normalizer does not know."""


_DATE_PARTS = re.compile(r"\d+")
_LETTER_NAMES = {"&": "and", "@": "at", "#": "hash", "-": "dash", ".": "dot", "+": "plus"}


def _characters(text: str, format: str | None, language: str) -> str:
    words = []
    for char in text:
        if char.isdigit():
            words.append(nw.DIGITS.get(language, nw.DIGITS["en"])[int(char)])
        elif char.isalpha():
            words.append(char.upper())
        elif char in _LETTER_NAMES and language == "en":
            words.append(_LETTER_NAMES[char])
    return " ".join(words)


def _number_text(text: str) -> str:
    found = re.search(r"[-−+]?\d[\d,.\s]*", text)
    if found is None:
        raise ValueError(f"no number in {text!r}")
    return found.group(0).strip()


def _cardinal(text: str, format: str | None, language: str) -> str:
    number = _number_text(text)
    if language == "en":
        return english.say_number(number.replace(" ", ""))
    from speechgate.text.normalize import european

    sign = "-" if number[0] in "-−" else "+" if number[0] == "+" else ""
    return european.say_number(number.lstrip("-−+"), language, sign)


def _ordinal(text: str, format: str | None, language: str) -> str:
    number = int(re.sub(r"\D", "", _number_text(text)))
    return nw.ordinal(number, language)


def _digits(text: str, format: str | None, language: str) -> str:
    return nw.digits(text, language)


def _date(text: str, format: str | None, language: str) -> str:
    """`format` names the order of the parts given: "mdy" (the default in US English), "dmy"
    (elsewhere), "ymd", "md", "dm", "ym", "my", "y", "m", "d"."""
    context = _context(language)
    order = format or ("dmy" if context.day_first else "mdy")
    if order.startswith("iso"):
        order = "ymd"
    numbers = [int(n) for n in _DATE_PARTS.findall(text)]
    if len(numbers) != len(order) or set(order) - set("ymd"):
        raise ValueError(f"date {text!r} does not have the parts of format {order!r}")
    parts = dict(zip(order, numbers, strict=True))
    year, month, day = parts.get("y"), parts.get("m"), parts.get("d")
    if year is not None and year < 100 and "y" in order:
        year += 2000
    if context.language == "en":
        day_first = context.day_first or "dm" in order.replace("y", "")
        said = english.say_date(year, month, day, day_first)
    elif month and day:
        said = _SAY_DATE[context.language](day, month, year, "")
    else:
        said = None
    if said is None:
        raise ValueError(f"not a date: {text!r}")
    return said


def _time(text: str, format: str | None, language: str) -> str:
    found = re.search(r"(\d{1,2})(?:[:h.](\d{2}))?(?::(\d{2}))?\s*(?:([AaPp])\.?\s?[Mm]\.?)?", text)
    if found is None:
        raise ValueError(f"not a time: {text!r}")
    hour, minute = int(found.group(1)), int(found.group(2) or 0)
    second = int(found.group(3)) if found.group(3) else None
    half = found.group(4)
    code = _context(language).language
    if code != "en":
        return _SAY_CLOCK[code](hour, minute)
    said = english.say_time(hour, minute, second, half)
    if said is None:
        raise ValueError(f"not a time: {text!r}")
    return said


def _telephone(text: str, format: str | None, language: str) -> str:
    return english.say_telephone(text)


def _currency(text: str, format: str | None, language: str) -> str:
    from speechgate.text.normalize import normalize

    spoken = normalize(text.strip(), language).spoken
    if spoken == text.strip():
        raise ValueError(f"not an amount of money: {text!r}")
    return spoken


def _fraction(text: str, format: str | None, language: str) -> str:
    found = re.fullmatch(r"\s*(?:(\d+)\s+)?(\d+)/(\d+)\s*", text)
    if found is None:
        raise ValueError(f"not a fraction: {text!r}")
    whole = int(found.group(1)) if found.group(1) else None
    return english.say_fraction(int(found.group(2)), int(found.group(3)), whole)


_SAY_DATE: dict[str, Callable[[int, int, int | None, str], str]] = {
    "de": german.say_date,
    "fr": french.say_date,
    "es": spanish.say_date,
}
_SAY_CLOCK: dict[str, Callable[[int, int], str]] = {
    "de": german.say_clock,
    "fr": french.say_clock,
    "es": spanish.say_clock,
}


def _context(language: str) -> Context:
    parts = language.replace("_", "-").split("-")
    region = next((p.upper() for p in parts[1:] if len(p) == 2), "")
    return Context(parts[0].lower(), region)


_SAY: dict[str, Callable[[str, str | None, str], str]] = {
    "characters": _characters,
    "spell-out": _characters,
    "verbatim": _characters,
    "cardinal": _cardinal,
    "number": _cardinal,
    "ordinal": _ordinal,
    "digits": _digits,
    "date": _date,
    "time": _time,
    "telephone": _telephone,
    "currency": _currency,
    "fraction": _fraction,
}
INTERPRETATIONS = frozenset(_SAY)
# Number-words languages; elsewhere only the language-free interpretations apply.
_LANGUAGES = frozenset(("en", "de", "fr", "es"))


def say_as(text: str, interpret_as: str, format: str | None = None, language: str = "en") -> str:
    """`text` said as `interpret_as`, with `format` where it takes one (a date's order). Raises
    `UnknownSayAs`, or ValueError for text that is not what it says it is."""
    say = _SAY.get(interpret_as.lower())
    if say is None:
        raise UnknownSayAs(f"unknown say-as interpret-as {interpret_as!r}")
    code = _context(language).language
    if code not in _LANGUAGES:
        # No number words for this language: say what needs none, keep the rest as written.
        if say not in (_characters, _telephone):
            return text
        language = code = "en"
    # A date, a time and an amount read the region too (a date's order).
    return say(text, format, language if say in (_date, _time, _currency) else code)
