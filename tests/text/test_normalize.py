"""The normalizer against the hard-text set, its map back to the written text, and say-as."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from speechgate.text.normalize import UnknownSayAs, normalize, say_as

_CASES = yaml.safe_load((Path(__file__).parent / "hard_text.yaml").read_text(encoding="utf-8"))


def _params() -> list[object]:
    return [
        pytest.param(language, case["text"], case["spoken"], id=f"{language}-{index}")
        for language, cases in _CASES.items()
        for index, case in enumerate(cases)
    ]


@pytest.mark.parametrize(("language", "text", "spoken"), _params())
def test_hard_text_is_said_as_a_careful_speaker_would(
    language: str, text: str, spoken: str
) -> None:
    assert normalize(text, language).spoken == spoken


def test_the_hard_text_set_covers_every_category() -> None:
    categories = {case["category"] for case in _CASES["en"]}
    assert len(_CASES["en"]) >= 100
    assert {
        "money", "date", "time", "ordinal", "year", "cardinal", "percent", "range", "phone",
        "unit", "abbreviation", "roman", "fraction", "sign", "symbol", "url", "email", "code",
        "emoji", "acronym",
    } <= categories  # fmt: skip
    for language in ("de-DE", "fr-FR", "es-ES"):
        assert len(_CASES[language]) >= 12
        assert {"number", "ordinal", "money", "date", "time"} <= {
            case["category"] for case in _CASES[language]
        }


def _span_of_word(text: str, spoken: str, word: str) -> tuple[int, int]:
    rewrite = normalize(text)
    assert rewrite.spoken == spoken
    start = spoken.index(word)
    return rewrite.source_span(start, start + len(word))


def test_each_spoken_word_of_a_replaced_token_maps_to_the_whole_token() -> None:
    text = "It costs $5.20 today."
    spoken = "It costs five dollars and twenty cents today."
    for word in ("five", "dollars", "twenty", "cents"):
        assert _span_of_word(text, spoken, word) == (9, 14)
    assert text[9:14] == "$5.20"


def test_unrelated_text_maps_character_for_character() -> None:
    text = "Say hello to Dr. Smith at 8:00 a.m. today."
    rewrite = normalize(text)
    assert rewrite.spoken == "Say hello to Doctor Smith at eight a m today."
    for word in ("Say", "hello", "Smith", "today"):
        start = rewrite.spoken.index(word)
        begin, end = rewrite.source_span(start, start + len(word))
        assert text[begin:end] == word
    begin, end = _span_of_word(text, rewrite.spoken, "Doctor")
    assert text[begin:end] == "Dr."


def test_text_without_anything_to_say_differently_is_unchanged() -> None:
    text = "Nothing here, really: just words; and (some) punctuation!\nA new line too."
    assert normalize(text).spoken == text
    assert normalize("", "en").spoken == ""


def test_phoneme_blocks_are_left_exactly_as_written() -> None:
    text = "Read [[ 5 $3 Dr. ɛ ]] and 5 [[ˈnɑsə]]."
    spoken = normalize(text).spoken
    assert spoken == "Read [[ 5 $3 Dr. ɛ ]] and five [[ˈnɑsə]]."


def test_an_abbreviation_inside_a_sentence_leaves_no_period_before_a_capital() -> None:
    spoken = normalize("Ask Dr. Smith on Dec. 2nd at 8 a.m. EST about it.").spoken
    assert spoken == "Ask Doctor Smith on December second at eight a m E S T about it."
    assert normalize("We open at 9 a.m. Come early.").spoken == "We open at nine a m. Come early."


def test_a_date_follows_the_region_of_the_language_tag() -> None:
    assert normalize("04/07/2026", "en-US").spoken == "April seventh, twenty twenty-six"
    assert normalize("04/07/2026", "en-GB").spoken == "the fourth of July twenty twenty-six"


def test_an_unsupported_language_keeps_its_numbers_and_drops_emoji() -> None:
    assert normalize("価格は $5.20 です ✅", "ja").spoken == "価格は $5.20 です"
    assert normalize("Cena 5,20 zł 🎉 dziś", "pl-PL").spoken == "Cena 5,20 zł dziś"


@pytest.mark.parametrize(
    ("text", "interpret_as", "format", "language", "spoken"),
    [
        ("ABC", "characters", None, "en", "A B C"),
        ("R2D2", "spell-out", None, "en", "R two D two"),
        ("1234", "cardinal", None, "en", "one thousand two hundred thirty-four"),
        ("1,234", "cardinal", None, "en", "one thousand two hundred thirty-four"),
        ("-3.5", "cardinal", None, "en", "minus three point five"),
        ("3,5", "cardinal", None, "de", "drei Komma fünf"),
        ("21", "ordinal", None, "en", "twenty-first"),
        ("3rd", "ordinal", None, "en", "third"),
        ("1234", "digits", None, "en", "one two three four"),
        ("2026-12-02", "date", "ymd", "en", "December second, twenty twenty-six"),
        ("12/02/2026", "date", "mdy", "en", "December second, twenty twenty-six"),
        ("02/12/2026", "date", "dmy", "en", "the second of December twenty twenty-six"),
        ("12/02", "date", "md", "en", "December second"),
        ("2026", "date", "y", "en", "twenty twenty-six"),
        ("02.12.2026", "date", "dmy", "de", "zweiter Dezember zweitausendsechsundzwanzig"),
        ("3:15 pm", "time", None, "en", "three fifteen p m"),
        ("14:30", "time", "hms24", "en", "fourteen thirty"),
        ("14:30", "time", None, "de", "vierzehn Uhr dreißig"),
        (
            "(555) 123-4567",
            "telephone",
            None,
            "en",
            "five five five, one two three, four five six seven",
        ),
        ("$5.20", "currency", None, "en", "five dollars and twenty cents"),
        ("5,20 €", "currency", None, "fr", "cinq euros vingt"),
        ("3/4", "fraction", None, "en", "three quarters"),
    ],
)
def test_say_as_says_what_it_is_told(
    text: str, interpret_as: str, format: str | None, language: str, spoken: str
) -> None:
    assert say_as(text, interpret_as, format, language) == spoken


@pytest.mark.parametrize(
    ("text", "interpret_as", "language", "spoken"),
    [
        ("12345", "cardinal", "en-US", "twelve thousand three hundred forty-five"),
        ("3", "ordinal", "en-US", "third"),
        ("2048", "digits", "en-GB", "two zero four eight"),
        ("a&1", "characters", "en-US", "A and one"),
        ("42", "cardinal", "de-DE", "zweiundvierzig"),
        ("1", "ordinal", "fr-FR", "premier"),
    ],
)
def test_say_as_takes_a_language_tag_with_its_region(
    text: str, interpret_as: str, language: str, spoken: str
) -> None:
    # The server passes the voice's tag ("en-US"), as the rest of the normalizer takes it.
    assert say_as(text, interpret_as, None, language) == spoken


def test_say_as_refuses_what_it_does_not_know() -> None:
    with pytest.raises(UnknownSayAs):
        say_as("x", "expletive")
    assert issubclass(UnknownSayAs, ValueError)
    with pytest.raises(ValueError, match="date"):
        say_as("soon", "date", "mdy")
