"""English: what a careful speaker says for money, dates, times, numbers, units, abbreviations,
Roman numerals, symbols, addresses and acronyms.

Each rule is a pattern and a function that says a match; `RULES` orders them so that the more
specific reading wins (a telephone number before a range, a date before a fraction, a URL
before an acronym).
"""

from __future__ import annotations

import re

from speechgate.text.normalize import number_words as nw
from speechgate.text.normalize.scan import (
    EMOJI,
    Context,
    Rule,
    is_sentence_start,
    word_after,
    word_before,
)

# A number as written: grouped thousands or plain digits, an optional decimal part.
NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_SIGN = r"(?<![\w.,)\]])(?P<sign>[-−+])?"
_DASH = r"[-–—]"

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_MONTH_ABBREVIATIONS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
    "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH_WORD = (
    r"(?P<month>January|February|March|April|May|June|July|August|September|October|November|"
    r"December|(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?)"
)

# Words that start a sentence far more often than they name someone, so "Oak Dr. Then" ends a
# sentence after "Drive" rather than introducing Doctor Then.
_SENTENCE_STARTERS = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "The A An It I We He She They This That These Those There Then Turn Go After Before "
        "When If But And So You Your My Our His Her Its Their In On At From Take Meet Call See"
    ).split()
)


def say_number(text: str, language: str = "en") -> str:
    """A written number ("1,299.99", "-3.5", "007") in words."""
    sign = ""
    if text[:1] in "-−+":
        sign = "-" if text[0] in "-−" else "+"
        text = text[1:]
    integer, _, fraction = text.partition(".")
    integer = integer.replace(",", "")
    if len(integer) > 1 and integer.startswith("0") and not fraction:
        return nw.digits(integer, language)
    if len(integer) > 15:
        return nw.digits(integer, language)
    return nw.decimal(integer, fraction or None, language, sign)


def is_one(text: str) -> bool:
    return text.lstrip("+") == "1"


# --- money -------------------------------------------------------------------------------------

_CURRENCIES = {
    # symbol or code: (singular, plural, minor singular, minor plural)
    "$": ("dollar", "dollars", "cent", "cents"),
    "USD": ("US dollar", "US dollars", "cent", "cents"),
    "US$": ("US dollar", "US dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "EUR": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "GBP": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
    "JPY": ("yen", "yen", "", ""),
    "CHF": ("Swiss franc", "Swiss francs", "centime", "centimes"),
    "¢": ("cent", "cents", "", ""),
}
_SCALES = {
    "k": "thousand", "K": "thousand", "thousand": "thousand",
    "m": "million", "M": "million", "mn": "million", "million": "million",
    "b": "billion", "B": "billion", "bn": "billion", "billion": "billion",
    "t": "trillion", "T": "trillion", "tn": "trillion", "trillion": "trillion",
}  # fmt: skip
_SCALE = (
    r"(?:\s?(?P<scale>k|K|m|M|mn|b|B|bn|tn|T)\b"
    r"|\s(?P<scaleword>thousand|million|billion|trillion)\b)"
)
_AMOUNT = rf"(?P<sign2>[-−])?(?P<amount>{NUM}){_SCALE}?"
MONEY = re.compile(
    rf"{_SIGN}(?:(?P<symbol>US\$|[$€£¥])\s?|(?P<code>USD|EUR|GBP|JPY|CHF)\s)"
    rf"{_AMOUNT}(?![\d%])"
)
MONEY_AFTER = re.compile(rf"{_SIGN}{_AMOUNT}\s?(?P<after>€|£|¢|USD|EUR|GBP|JPY|CHF)(?![\w])")


def say_money(amount: str, unit: str, negative: bool = False, scale: str | None = None) -> str:
    """An amount of `unit` (a symbol or ISO code) in words: "$5.20" -> "five dollars and
    twenty cents", "£3m" -> "three million pounds"."""
    one, many, minor_one, minor_many = _CURRENCIES[unit]
    integer, _, fraction = amount.replace(",", "").partition(".")
    minus = "minus " if negative else ""
    if scale:
        number = say_number(amount)
        return f"{minus}{number} {_SCALES[scale]} {many}"
    if fraction and ((len(fraction) != 2 and len(fraction) != 1) or not minor_many):
        return f"{minus}{say_number(amount)} {many}"
    whole = int(integer or "0")
    cents = int(fraction.ljust(2, "0")) if fraction else 0
    parts = []
    if whole or not cents:
        parts.append(f"{nw.cardinal(whole)} {one if whole == 1 else many}")
    if cents:
        parts.append(f"{nw.cardinal(cents)} {minor_one if cents == 1 else minor_many}")
    return minus + " and ".join(parts)


def _money(match: re.Match[str], context: Context) -> str:
    groups = match.groupdict()
    unit = groups.get("symbol") or groups.get("code") or groups["after"]
    negative = bool(match.group("sign") in ("-", "−") or match.group("sign2"))
    scale = match.group("scale") or match.group("scaleword")
    return say_money(match.group("amount"), unit, negative, scale)


# --- dates and times ---------------------------------------------------------------------------


def say_date(
    year: int | None, month: int | None, day: int | None, day_first: bool = False
) -> str | None:
    """A date in words, any part missing: "December second, twenty twenty-six" (US order) or
    "the second of December twenty twenty-six" (day first); None for an impossible date."""
    if (month is not None and not 1 <= month <= 12) or (day is not None and not 1 <= day <= 31):
        return None
    month_name = MONTHS[month - 1] if month else None
    year_words = nw.year(year) if year is not None else None
    if month_name and day:
        if day_first:
            said = f"the {nw.ordinal(day)} of {month_name}"
            return f"{said} {year_words}" if year_words else said
        said = f"{month_name} {nw.ordinal(day)}"
        return f"{said}, {year_words}" if year_words else said
    if month_name:
        return f"{month_name} {year_words}" if year_words else month_name
    if day:
        return f"the {nw.ordinal(day)}"
    return year_words


ISO_DATE = re.compile(r"(?<![\w./-])(\d{4})-(\d{2})-(\d{2})(?![\w/-]|\.\d)")
NUMERIC_DATE = re.compile(r"(?<![\w./-])(\d{1,2})([/.])(\d{1,2})\2(\d{4}|\d{2})(?![\w/]|\.\d)")
MONTH_DAY = re.compile(
    rf"\b{_MONTH_WORD}\s(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s(?P<year>\d{{4}})\b)?"
)
DAY_MONTH = re.compile(
    rf"(?<![\w.])(?:the\s)?(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s(?:of\s)?{_MONTH_WORD}"
    rf"(?:,?\s(?P<year>\d{{4}})\b)?"
)


def _month_number(word: str) -> int:
    word = word.rstrip(".").lower()
    if word in _MONTH_ABBREVIATIONS:
        return _MONTH_ABBREVIATIONS[word]
    return [m.lower() for m in MONTHS].index(word) + 1


def _iso_date(match: re.Match[str], context: Context) -> str | None:
    year, month, day = (int(g) for g in match.groups())
    return say_date(year, month, day, context.day_first)


def _numeric_date(match: re.Match[str], context: Context) -> str | None:
    first, _, second, year_text = match.groups()
    a, b = int(first), int(second)
    year = int(year_text) if len(year_text) == 4 else 2000 + int(year_text)
    day_first = context.day_first
    if a > 12:
        day_first = True
    elif b > 12:
        day_first = False
    day, month = (a, b) if day_first else (b, a)
    return say_date(year, month, day, day_first)


def _month_day(match: re.Match[str], context: Context) -> str | None:
    year = int(match.group("year")) if match.group("year") else None
    month = _month_number(match.group("month"))
    said = say_date(year, month, int(match.group("day")), day_first=False)
    return said and said + _period_if_end(match, context, match.group("year") is None)


def _day_month(match: re.Match[str], context: Context) -> str | None:
    year = int(match.group("year")) if match.group("year") else None
    month = _month_number(match.group("month"))
    said = say_date(year, month, int(match.group("day")), day_first=True)
    if (
        said
        and not match.group(0).startswith("the")
        and word_before(match.string, match.start()).lower()
        in ("on", "of", "by", "until", "till", "from", "since")
    ):
        said = said.removeprefix("the ")
        said = f"the {said}"
    return said and said + _period_if_end(match, context, year is None)


def _period_if_end(match: re.Match[str], context: Context, applies: bool = True) -> str:
    """ "." when the match ended with an abbreviation's period that also ends the sentence."""
    if applies and match.group(0).endswith(".") and ends_sentence(match.string, match.end()):
        return "."
    return ""


def ends_sentence(text: str, position: int) -> bool:
    """Whether a period just before `position` probably also ends a sentence: the text ends,
    or a capital (or a new line) follows."""
    rest = text[position:]
    if not rest.strip():
        return True
    found = re.match(r"\s*[\"'“‘(]*(\S)", rest)
    if found is None or not rest[:1].isspace():
        return False
    return found.group(1).isupper() or "\n" in rest[: found.start(1)]


TIME = re.compile(
    r"(?<![\w:.])(?P<hour>\d{1,2}):(?P<minute>[0-5]\d)(?::(?P<second>[0-5]\d))?"
    r"(?:\s?(?P<half>[AaPp])\.?\s?[Mm](?:\.|\b))?(?![\d:])"
    r"|(?<![\w:.])(?P<hour2>\d{1,2})\s?(?P<half2>[AaPp])\.?\s?[Mm](?:\.|\b)"
)
_ZONES = frozenset(
    [
        "UTC",
        "GMT",
        "EST",
        "EDT",
        "CST",
        "CDT",
        "MST",
        "MDT",
        "PST",
        "PDT",
        "AKST",
        "HST",
        "BST",
        "CET",
        "CEST",
        "EET",
        "IST",
        "JST",
        "AEST",
    ]
)


def say_time(
    hour: int, minute: int, second: int | None = None, half: str | None = None
) -> str | None:
    """A clock time: "eight a m", "three fifteen p m", "fourteen thirty", "three oh five"."""
    if hour > 24 or (half and not 1 <= hour <= 12):
        return None
    if second is not None and not half:
        return say_duration(hour, minute, second)
    words = nw.cardinal(hour)
    if minute == 0 and second is None:
        if half:
            words += f" {half.lower()} m"
        elif hour > 12 or hour == 0:
            words += " hundred"
        else:
            words += " o'clock"
        return words
    if minute < 10:
        words += f" oh {nw.cardinal(minute)}"
    else:
        words += f" {nw.cardinal(minute)}"
    if second is not None:
        unit = "second" if second == 1 else "seconds"
        words += f" and {nw.cardinal(second)} {unit}"
    if half:
        words += f" {half.lower()} m"
    return words


def say_duration(hours: int, minutes: int, seconds: int) -> str:
    """ "1:02:30" as a stopwatch reads: "one hour two minutes and thirty seconds"."""
    parts = [
        f"{nw.cardinal(value)} {name if value == 1 else name + 's'}"
        for value, name in ((hours, "hour"), (minutes, "minute"), (seconds, "second"))
        if value
    ]
    if not parts:
        return "zero seconds"
    return " and ".join(parts) if len(parts) < 3 else f"{parts[0]} {parts[1]} and {parts[2]}"


def _time(match: re.Match[str], context: Context) -> str | None:
    if match.group("hour2"):
        hour, minute, second = int(match.group("hour2")), 0, None
        half = match.group("half2")
    else:
        hour, minute = int(match.group("hour")), int(match.group("minute"))
        second = int(match.group("second")) if match.group("second") else None
        half = match.group("half")
    said = say_time(hour, minute, second, half)
    if said is None:
        return None
    text = match.string
    if match.group(0).endswith(".") and word_after(text, match.end()) not in _ZONES:
        said += _period_if_end(match, context)
    return said


# --- quantities: numbers, ranges, units, percentages -----------------------------------------

# unit: (singular, plural)
_UNITS = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"),
    "m/s": ("meter per second", "meters per second"),
    "km²": ("square kilometer", "square kilometers"),
    "m²": ("square meter", "square meters"),
    "m³": ("cubic meter", "cubic meters"),
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"),
    "mi": ("mile", "miles"),
    "ft": ("foot", "feet"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "l": ("liter", "liters"),
    "L": ("liter", "liters"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
    "%": ("percent", "percent"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "ms": ("millisecond", "milliseconds"),
    "s": ("second", "seconds"),
    "sec": ("second", "seconds"),
    "min": ("minute", "minutes"),
    "h": ("hour", "hours"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "W": ("watt", "watts"),
    "V": ("volt", "volts"),
    "mAh": ("milliamp hour", "milliamp hours"),
    "px": ("pixel", "pixels"),
}
_UNIT_NAMES = sorted(_UNITS, key=len, reverse=True)
_UNIT = "|".join(re.escape(u) for u in _UNIT_NAMES)
# A unit over another ("g/km"), then a single unit; a letter unit must end its word.
_UNIT_PATTERN = rf"(?:{_UNIT})(?:/(?:{_UNIT}))?"
QUANTITY = re.compile(
    rf"{_SIGN}(?P<first>{NUM})(?:\s?(?P<dash>–|—|-)\s?(?P<second>[-−]?{NUM})|"
    rf"\s(?P<to>to)\s(?P<second2>{NUM}))?"
    rf"(?:\s?(?P<unit>{_UNIT_PATTERN})(?![\w/]))?"
)
_PER = re.compile(rf"(?P<top>{_UNIT})/(?P<bottom>{_UNIT})")
_YEAR_CONTEXT = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "in since by of from until till year circa before after during around early late mid "
        "summer winter spring fall autumn between and to through"
    ).split()
    + [m.lower() for m in MONTHS]
)
# Words after a four-digit number that make it a count ("1500 people"), not a year.
_NOT_PLURAL = frozenset(
    [
        "was",
        "is",
        "has",
        "does",
        "marks",
        "sees",
        "brings",
        "remains",
        "begins",
        "ends",
        "looks",
        "seems",
        "means",
        "goes",
        "always",
    ]
)
_IRREGULAR_PLURALS = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "people children men women feet teeth mice geese staff sheep fish deer police cattle "
        "personnel"
    ).split()
)


def say_unit(unit: str, plural: bool) -> str:
    per = _PER.fullmatch(unit)
    if per and unit not in _UNITS:
        top = _UNITS[per.group("top")][1 if plural else 0]
        return f"{top} per {_UNITS[per.group('bottom')][0]}"
    return _UNITS[unit][1 if plural else 0]


def _is_year(text: str, match_start: int, match_end: int, number: str) -> bool:
    """Whether a bare four-digit number reads as a year: a year-like value, no count noun
    after it ("1500 people"), and a year word before it or a verb or punctuation after it."""
    if not re.fullmatch(r"1[1-9]\d\d|20\d\d", number):
        return False
    after = word_after(text, match_end)
    if after in _IRREGULAR_PLURALS or (
        after[:1].islower() and after.endswith("s") and after not in _NOT_PLURAL
    ):
        return False
    before = word_before(text, match_start).lower()
    return before not in ("than", "about", "over", "under", "nearly", "almost", "exactly", "$")


def _quantity(match: re.Match[str], context: Context) -> str | None:
    text = match.string
    sign = match.group("sign") or ""
    first = match.group("first")
    second = match.group("second") or match.group("second2")
    unit = match.group("unit")
    dash = match.group("dash")
    # "555-1234" is not a range: a hyphen between numbers of unlike lengths ending in four
    # digits is a number's own grouping.
    if (
        dash == "-"
        and second
        and not unit
        and "," not in first + second
        and len(first) != len(second)
        and len(second) == 4
    ):
        return None
    if second is None and unit is None:
        return None
    years = (
        second is not None
        and unit is None
        and _is_year(text, match.start(), match.end(), first)
        and re.fullmatch(r"\d{2,4}", second) is not None
    )
    if years:
        assert second is not None
        if len(second) == 2:  # "1990-95"
            second = first[:2] + second
        return f"{nw.year(int(first))} to {nw.year(int(second))}"
    words = say_number(sign + first)
    if second is not None:
        words += f" to {say_number(second)}"
    if unit:
        value = second or first
        plural = not (is_one(value) and not sign.startswith(("-", "−")))
        words += f" {say_unit(unit, plural)}"
    return words


# Three or more dot-separated numbers: a version ("3.11.2"), each part a number.
VERSION = re.compile(r"(?<![\w.])(?P<version>\d+(?:\.\d+){2,})(?![\w.]*\d)")
# Two numbers around a colon that cannot be a time ("16:9", "3:1"): a ratio.
RATIO = re.compile(r"(?<![\w:.,])(?P<left>\d+):(?P<right>\d+)(?![\d:]|\.\d)")


def _version(match: re.Match[str], context: Context) -> str:
    return " point ".join(say_number(part) for part in match.group("version").split("."))


def _ratio(match: re.Match[str], context: Context) -> str:
    return f"{say_number(match.group('left'))} to {say_number(match.group('right'))}"


NUMBER = re.compile(rf"{_SIGN}(?P<number>{NUM}|\.\d+)(?![\d,]\d)")


def _number(match: re.Match[str], context: Context) -> str | None:
    number = match.group("number")
    sign = match.group("sign") or ""
    if not sign and _is_year(match.string, match.start(), match.end(), number):
        return nw.year(int(number))
    if number.startswith("."):
        number = "0" + number
    return say_number(sign + number)


ORDINAL = re.compile(r"(?<![\w.,])(?P<number>\d+)(?P<suffix>st|nd|rd|th|ST|ND|RD|TH)\b")


def _ordinal(match: re.Match[str], context: Context) -> str:
    return nw.ordinal(int(match.group("number")))


DECADE = re.compile(r"(?<![\w.,])(?:(?P<apostrophe>['’])(?P<tens>\d)0|(?P<start>\d{1,3})0)s\b")


def plural_of_number(words: str) -> str:
    """ "nineteen ninety" -> "nineteen nineties", "twenty ten" -> "twenty tens"."""
    head, _, last = words.rpartition(" ")
    last = last[:-1] + "ies" if last.endswith("y") else last + "s"
    return f"{head} {last}" if head else last


def _decade(match: re.Match[str], context: Context) -> str | None:
    if match.group("tens"):
        return plural_of_number(nw.cardinal(int(match.group("tens")) * 10))
    value = int(match.group("start") + "0")
    if value < 10:
        return None
    if value >= 1000:
        return plural_of_number(nw.year(value))
    return plural_of_number(nw.cardinal(value))


# --- fractions -------------------------------------------------------------------------------

_VULGAR = {"½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅛": (1, 8)}
FRACTION = re.compile(
    r"(?<![\w/.,])(?:(?P<whole>\d+)\s)?(?P<top>\d+)/(?P<bottom>\d+)(?![\w/]|\.\d)"
    r"|(?:(?P<whole2>\d+)\s?)?(?P<vulgar>[½⅓⅔¼¾⅛])"
)


def say_fraction(top: int, bottom: int, whole: int | None = None) -> str:
    """ "three quarters", "one half", "two and a half", "five eighths"."""
    if bottom == 2:
        name = "half" if top == 1 else "halves"
    elif bottom == 4:
        name = "quarter" if top == 1 else "quarters"
    else:
        name = nw.ordinal(bottom)
        if top != 1:
            name += "s"
    if whole is not None:
        article = "a" if top == 1 else nw.cardinal(top)
        return f"{nw.cardinal(whole)} and {article} {name}"
    return f"{nw.cardinal(top)} {name}"


def _fraction(match: re.Match[str], context: Context) -> str | None:
    if match.group("vulgar"):
        top, bottom = _VULGAR[match.group("vulgar")]
        whole_text = match.group("whole2")
    else:
        top, bottom = int(match.group("top")), int(match.group("bottom"))
        whole_text = match.group("whole")
        if match.group(0).endswith("24/7"):
            return None if whole_text else "twenty-four seven"
        if bottom < 2 or (bottom > 16 and bottom not in (32, 64, 100)) or top >= 10 * bottom:
            return None
        if match.group("bottom").startswith("0"):
            return None
    whole = int(whole_text) if whole_text else None
    if whole is not None and top >= bottom:
        return None
    return say_fraction(top, bottom, whole)


# --- telephone numbers -------------------------------------------------------------------------

PHONE = re.compile(
    r"(?<![\w+])(?:\+(?P<country>\d{1,3})[\s.-]?)?(?:\((?P<area>\d{2,4})\)\s?|(?P<area2>\d{3})[\s.-])"
    r"(?P<exchange>\d{3})[\s.-](?P<line>\d{4})(?![\w-])"
    r"|(?<![\w+])\+(?P<country2>\d{1,3})(?P<groups>(?:[\s.-]\d{2,4}){2,5})(?![\w-])"
)


def say_telephone(text: str) -> str:
    """Digit groups, a comma between them: "(555) 123-4567" -> "five five five, one two
    three, four five six seven"; a leading "+" as "plus"."""
    groups = re.findall(r"\+?\d+", text)
    said = []
    for group in groups:
        words = nw.digits(group)
        said.append(f"plus {words}" if group.startswith("+") else words)
    return ", ".join(said)


def _phone(match: re.Match[str], context: Context) -> str:
    return say_telephone(match.group(0))


# --- words: abbreviations, Roman numerals, acronyms ------------------------------------------

# Always a title, whatever follows ("Mr. and Mrs. Jones").
_SOCIAL_TITLES = {"Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Prof": "Professor"}
_TITLES = {
    "Gen": "General",
    "Capt": "Captain", "Lt": "Lieutenant", "Sgt": "Sergeant", "Rev": "Reverend",
    "Sen": "Senator", "Rep": "Representative", "Gov": "Governor", "Pres": "President",
    "Mt": "Mount", "Ft": "Fort",
}  # fmt: skip
_PLACES = {"Ave": "Avenue", "Rd": "Road", "Blvd": "Boulevard", "Ln": "Lane", "Hwy": "Highway"}
# Never the end of a sentence, whatever follows.
_INNER = {
    "vs": "versus", "e.g": "for example", "i.e": "that is", "approx": "approximately",
    "cf": "compare", "Fig": "figure", "fig": "figure",
}  # fmt: skip
# May end a sentence (then their period stays).
_FINAL = {
    "etc": "et cetera", "Jr": "Junior", "Sr": "Senior", "Inc": "Incorporated",
    "Ltd": "Limited", "Corp": "Corporation", "Co": "Company", "Bros": "Brothers",
    "U.S": "U S", "U.K": "U K", "U.N": "U N", "a.m": "a m", "p.m": "p m",
    "Mon": "Monday", "Tue": "Tuesday", "Tues": "Tuesday", "Wed": "Wednesday",
    "Thu": "Thursday", "Thurs": "Thursday", "Fri": "Friday", "Sat": "Saturday",
    "Sun": "Sunday",
}  # fmt: skip
for _short, _month in _MONTH_ABBREVIATIONS.items():
    _FINAL[_short.capitalize()] = MONTHS[_month - 1]

ABBREVIATION = re.compile(
    r"(?<![\w.])(?P<number>No|Nos|no|nos)\.\s?(?=\d)"
    r"|(?<![\w.])(?P<word>e\.g|i\.e|a\.m|p\.m|U\.S|U\.K|U\.N|[A-Za-z]{1,6})\.(?=[\s,;:)\"'”’]|$)"
    r"|(?<![\w.])(?P<vs>vs)\b(?!\.)"
)


def _abbreviation(match: re.Match[str], context: Context) -> str | None:
    text = match.string
    if match.group("vs"):
        return "versus"
    if match.group("number"):
        return "number " if match.group(0).endswith(" ") else "number"
    word = match.group("word")
    start, end = match.start(), match.end()
    after = word_after(text, end)
    title_follows = bool(after[:1].isupper()) and after not in _SENTENCE_STARTERS
    before = word_before(text, start)
    place_before = (
        bool(before[:1].isupper())
        and not is_sentence_start(text, start - len(before) - 1 if start > len(before) else 0)
    ) or bool(before[:1].isdigit())
    if word in ("St", "Dr"):
        if title_follows and (word == "Dr" or not place_before):
            return "Saint" if word == "St" else "Doctor"
        if place_before or (not title_follows and word == "St"):
            expanded = "Street" if word == "St" else "Drive"
            return expanded + ("." if ends_sentence(text, end) else "")
        return "Doctor" if word == "Dr" else "Saint"
    if word in _SOCIAL_TITLES:
        return _SOCIAL_TITLES[word]
    if word in _TITLES:
        return _TITLES[word] if after[:1].isupper() else None
    if word in _PLACES:
        return _PLACES[word] + ("." if ends_sentence(text, end) else "")
    if word in _INNER:
        return _INNER[word]
    if word[:1].isupper() and word.lower() in _INNER:
        # Capitalized at the start of a sentence ("Approx. 300 people came").
        said = _INNER[word.lower()]
        return said[0].upper() + said[1:]
    if word in _FINAL:
        return _FINAL[word] + ("." if ends_sentence(text, end) else "")
    return None


_ROMAN = re.compile(
    r"\b(?=[MDCLXVI])(?P<roman>M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3}))\b"
    r"(?![-'’]\w)"
)
_COUNTED = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "war chapter part volume vol book act scene phase episode title article section stage "
        "level appendix bowl grade type class tier season psalm canto mark round series"
    ).split()
)
_REGNAL = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "Henry Louis Elizabeth George Edward Charles William James Richard John Paul Pius "
        "Benedict Gregory Leo Philip Frederick Peter Catherine Mary Napoleon Ramesses Alexander "
        "Innocent Clement Alfonso Ludwig Wilhelm Victor Francis Ferdinand Nicholas Ivan Otto "
        "Constantine Anne Urban Boniface Felix Sixtus Stephen Carl Gustav Harald Olaf Haakon "
        "Christian Rudolf Albert Leopold Juan Felipe Fernando Pedro Manuel Umberto Rama"
    ).split()
)


def roman_value(text: str) -> int:
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for index, char in enumerate(text):
        value = values[char]
        if index + 1 < len(text) and values[text[index + 1]] > value:
            total -= value
        else:
            total += value
    return total


def _roman(match: re.Match[str], context: Context) -> str | None:
    roman = match.group("roman")
    if not roman:
        return None
    before = word_before(match.string, match.start()).rstrip(".")
    if before in _REGNAL:
        return f"the {nw.ordinal(roman_value(roman))}"
    if before.lower() in _COUNTED:
        return nw.cardinal(roman_value(roman))
    return None


_AS_WORDS = {
    "NASA": "Nasa", "NATO": "Nato", "JSON": "Jason", "UNESCO": "Unesco", "UNICEF": "Unicef",
    "OPEC": "Opec", "FIFA": "Fifa", "NAFTA": "Nafta", "IKEA": "Ikea", "COVID": "Covid",
    "AIDS": "aids", "LASER": "laser", "RADAR": "radar", "SCUBA": "scuba", "GIF": "gif",
    "JPEG": "jay peg", "PIN": "pin", "RAM": "ram", "ROM": "rom", "SIM": "sim", "LAN": "lan",
    "WAN": "wan", "GUI": "gooey", "OK": "okay", "CAPTCHA": "captcha", "ASCII": "askee",
    "YAML": "yammel", "WASM": "wasm", "SWAT": "swat", "POTUS": "Potus", "SCOTUS": "Scotus",
    "CERN": "Cern", "NASDAQ": "Nasdaq", "GIFs": "gifs", "IEEE": "I triple E",
    "SQL": "S Q L", "WWW": "W W W", "AAA": "triple A",
}  # fmt: skip
# Three letters or fewer with a vowel that are English words when a whole phrase is in
# capitals ("THE END"); spelled when they stand among lower-case words ("IT", "US" aside).
_CAPITAL_WORDS = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "THE AND FOR BUT NOT YOU ARE WAS HAS ALL NEW NOW OUT ONE TWO GET LET YES OUR HIS HER "
        "CAN WHO WHY HOW BIG NO SO GO DO TO OF IN ON AT BY IS BE WE ME MY UP OR IF AN AS HE "
        "ANY DAY END BAD OLD TOP HOT"
    ).split()
)
# Capitals that are words, not letters to spell: left for the engine as written.
_KEPT = frozenset(("MIX", "DIY", "FAB", "LOL", "BOGO"))
ACRONYM = re.compile(
    r"(?<![\w.@/#&'’-])(?P<letters>[A-Z]{2,})(?P<plural>s|'s|’s)?(?![\w@/&'’-]|\.\w)"
    r"|(?<![\w.])(?P<initial>[A-Z]{1,3})&(?P<final>[A-Z]{1,3})\b"
)
_VOWELS = set("AEIOUY")


def spell_letters(letters: str) -> str:
    return " ".join(letters)


def say_acronym(letters: str) -> str | None:
    """How people say an all-capitals word: read as a word from a short list, else spelled if
    it has no vowel or three letters or fewer, else left to the engine (a shouted word)."""
    if letters in _AS_WORDS:
        return _AS_WORDS[letters]
    if letters in _KEPT:
        return None
    if len(letters) <= 3 or not _VOWELS & set(letters):
        return spell_letters(letters)
    return None


def _acronym(match: re.Match[str], context: Context) -> str | None:
    if match.group("initial"):
        return f"{spell_letters(match.group('initial'))} and {spell_letters(match.group('final'))}"
    letters = match.group("letters")
    text = match.string
    if letters in _CAPITAL_WORDS:
        neighbours = (word_before(text, match.start()), word_after(text, match.end()))
        if any(n.isupper() and len(n) > 1 for n in neighbours):
            return None
    said = say_acronym(letters)
    if said is None:
        return None
    plural = match.group("plural")
    if plural:
        said += "'s" if said[-1].isupper() else "s"
    return said


# --- addresses, code and symbols -------------------------------------------------------------

_SYMBOL_NAMES = {
    ".": "dot", "/": "slash", "?": "question mark", "=": "equals", "&": "and", "-": "dash",
    "_": "underscore", ":": "colon", "#": "hash", "@": "at", "+": "plus", "~": "tilde",
    "%": "percent",
}  # fmt: skip
_TLD_WORDS = frozenset(["com", "org", "net", "gov", "edu", "info", "biz", "app", "dev", "shop"])


def say_address_piece(piece: str, in_domain: bool = False) -> str:
    """A piece of a URL or e-mail address between symbols: a word as it is, digits one by
    one, a short top-level domain or a part without vowels spelled."""
    if piece.isdigit():
        return nw.digits(piece)
    if in_domain and piece.lower() not in _TLD_WORDS and len(piece) <= 3:
        return spell_letters(piece.upper() if len(piece) <= 2 else piece)
    if not _VOWELS & set(piece.upper()):
        return spell_letters(piece)
    return piece


def say_address(text: str, domain_from: int = 0) -> str:
    """A URL or e-mail address, symbol by symbol: "jane.doe@mail.org" -> "jane dot doe at mail
    dot org". Pieces after `domain_from` are host names (short ones spelled)."""
    words = []
    for piece in re.finditer(r"[A-Za-z]+|\d+|[^A-Za-z\d]", text):
        token = piece.group(0)
        if token in _SYMBOL_NAMES:
            words.append(_SYMBOL_NAMES[token])
        elif token[0].isalnum():
            is_last = not re.search(r"[A-Za-z\d]", text[piece.end() :].split("/")[0])
            tld = (
                piece.start() >= domain_from
                and is_last
                and "/" not in text[domain_from : piece.start()]
            )
            words.append(say_address_piece(token, tld))
    return " ".join(words)


URL = re.compile(
    r"(?:https?://|www\.)[^\s<>\"']+[^\s<>\"'.,;:!?)\]]"
    r"|(?<![\w@.-])[A-Za-z\d][\w-]*(?:\.[\w-]+)*\.(?:com|org|net|io|dev|ai|co|uk|de|fr|es|edu|gov"
    r"|app|info|eu|us|ca|me|tv|ly|gg)\b(?:/[^\s<>\"']*[^\s<>\"'.,;:!?)\]])?(?![\w@-])"
)
EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[\w-]+(?:\.[\w-]+)+(?<![.])")


def _url(match: re.Match[str], context: Context) -> str:
    return say_address(re.sub(r"^https?://", "", match.group(0)))


def _email(match: re.Match[str], context: Context) -> str:
    address = match.group(0)
    return say_address(address, address.index("@"))


CODE = re.compile(
    r"(?<![\w#])(?P<sharp>[CF])#(?!\w)"
    r"|(?<![\w+])(?P<plusplus>C)\+\+(?!\w)"
    r"|(?<![\w#])#(?P<hashtag>[A-Za-z_]\w*)"
    r"|(?<![\w#])#(?P<numbered>\d+)\b"
    r"|(?<![\w./])(?P<query>\w+\?\w+=\w+(?:&\w+=\w+)*)"
    r"|(?<![\w.])(?P<snake>[a-z][a-z\d]*(?:_[a-z\d]+)+)\b"
    r"|(?<![\w.])(?P<camel>[a-z]{2,}(?:[A-Z][a-z\d]+)+)\b"
)


def split_identifier(name: str) -> str:
    """ "snake_case" and "camelCase" as the words they join; digits as numbers."""
    parts = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)
    return " ".join(nw.cardinal(int(p)) if p.isdigit() else p.lower() for p in parts)


def _code(match: re.Match[str], context: Context) -> str | None:
    if match.group("sharp"):
        return f"{match.group('sharp')} sharp"
    if match.group("plusplus"):
        return "C plus plus"
    if match.group("hashtag"):
        return f"hashtag {split_identifier(match.group('hashtag'))}"
    if match.group("numbered"):
        return f"number {say_number(match.group('numbered'))}"
    if match.group("query"):
        return say_query(match.group("query"))
    return split_identifier(match.group("snake") or match.group("camel"))


def say_query(text: str) -> str:
    words = []
    for piece in re.finditer(r"[A-Za-z]+|\d+|[^A-Za-z\d]", text):
        token = piece.group(0)
        if token.isdigit():
            words.append(say_number(token))
        elif token in _SYMBOL_NAMES:
            words.append(_SYMBOL_NAMES[token])
        else:
            words.append(token)
    return " ".join(words)


SYMBOL = re.compile(
    r"(?<=\s)(?P<spaced>[&+=×÷<>±→@])(?=\s)"
    r"|(?<![\w~])~(?=\d)"
    r"|(?<=\d)(?P<times>[x×])(?=\d)"
    r"|(?<![\w±])±(?=\d)"
    r"|\b(?P<with>w/)(?=\s)"
)
_SPACED_SYMBOLS = {
    "&": "and", "+": "plus", "=": "equals", "×": "times", "÷": "divided by", "<": "less than",
    ">": "greater than", "±": "plus or minus", "→": "to", "@": "at",
}  # fmt: skip


def _symbol(match: re.Match[str], context: Context) -> str:
    symbol = match.group(0)
    if match.group("spaced"):
        return _SPACED_SYMBOLS[symbol]
    if match.group("times"):
        return " by "
    if match.group("with"):
        return "with"
    if symbol == "~":
        return "about "
    return "plus or minus "


RULES = (
    EMOJI,
    Rule(URL, _url),
    Rule(EMAIL, _email),
    Rule(CODE, _code),
    Rule(PHONE, _phone),
    Rule(ISO_DATE, _iso_date),
    Rule(NUMERIC_DATE, _numeric_date),
    Rule(MONTH_DAY, _month_day),
    Rule(DAY_MONTH, _day_month),
    Rule(TIME, _time),
    Rule(VERSION, _version),
    Rule(RATIO, _ratio),
    Rule(MONEY, _money),
    Rule(MONEY_AFTER, _money),
    Rule(DECADE, _decade),
    Rule(ORDINAL, _ordinal),
    Rule(FRACTION, _fraction),
    Rule(QUANTITY, _quantity),
    Rule(_ROMAN, _roman),
    Rule(ABBREVIATION, _abbreviation),
    Rule(ACRONYM, _acronym),
    Rule(SYMBOL, _symbol),
    Rule(NUMBER, _number),
)
