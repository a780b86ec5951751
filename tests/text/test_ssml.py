# ruff: noqa: RUF001 - IPA in strings
import pytest

from speechgate.errors import InvalidRequest
from speechgate.text.ssml import (
    MAX_DEPTH,
    Markup,
    Pause,
    Voiced,
    has_inline_tags,
    is_ssml,
    parse_break_time,
    parse_inline,
    parse_rate,
    parse_ssml,
)


def said(document: str, markup: Markup) -> list[object]:
    """Each part as what it says (a string) or its pause in seconds."""
    out: list[object] = []
    for part in markup.parts:
        if isinstance(part, Pause):
            out.append(part.seconds)
        else:
            out.append(
                "".join(
                    document[p.start : p.end] if p.spoken is None else p.spoken for p in part.pieces
                ).strip()
            )
    return out


def refused(document: str) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_ssml(document)
    assert caught.value.code == "invalid_ssml"
    assert caught.value.param == "input"
    return caught.value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<speak>Hi</speak>", True),
        ("  \n<speak version='1.1'>Hi</speak>", True),
        ('<?xml version="1.0"?>\n<speak>Hi</speak>', True),
        ("<speak/>", True),
        ("Hello <speak>", False),
        ("<speaker>Hi</speaker>", False),
        ('Hi <break time="1s"/>', False),
    ],
)
def test_a_speak_document_is_detected(text: str, expected: bool) -> None:
    assert is_ssml(text) is expected


def test_break_time_and_strength_give_pauses() -> None:
    document = (
        '<speak>a<break time="1.5s"/>b<break time="500ms"/>c<break strength="weak"/>d'
        '<break strength="x-strong"/>e<break/>f<break strength="none"/>g</speak>'
    )
    assert said(document, parse_ssml(document)) == [
        "a",
        1.5,
        "b",
        0.5,
        "c",
        0.25,
        "d",
        1.5,
        "e",
        0.5,
        "fg",
    ]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1.5s", 1.5),
        ("500ms", 0.5),
        (" 2 s ", 2.0),
        (".25s", 0.25),
        ("1S", 1.0),
        ("1", None),
        ("-1s", None),
        ("1 min", None),
        ("abc", None),
    ],
)
def test_break_times_are_parsed(value: str, seconds: float | None) -> None:
    assert parse_break_time(value) == seconds


@pytest.mark.parametrize("time_", ["abc", "10.5s", "11000ms", "-2s"])
def test_a_bad_or_too_long_break_is_refused_where_it_is(time_: str) -> None:
    error = refused(f'<speak>\n  Hi <break time="{time_}"/></speak>')
    assert "line 2, column 6" in error.message
    assert time_ in error.message


def test_an_unknown_break_strength_is_refused() -> None:
    assert "strength" in refused('<speak><break strength="huge"/></speak>').message


def test_say_as_is_spoken_through_the_say_as_function() -> None:
    calls: list[tuple[str, str, str | None, str]] = []

    def say_as(text: str, interpret_as: str, format: str | None, language: str) -> str:
        calls.append((text, interpret_as, format, language))
        return f"<{interpret_as} {text}>"

    document = (
        '<speak>Call <say-as interpret-as="telephone">555 0199</say-as> on '
        '<say-as interpret-as="date" format="dmy">02/12/2026</say-as>.</speak>'
    )
    markup = parse_ssml(document, say_as, language="de")
    assert said(document, markup) == ["Call <telephone 555 0199> on <date 02/12/2026>."]
    assert calls == [("555 0199", "telephone", None, "de"), ("02/12/2026", "date", "dmy", "de")]
    piece = markup.parts[0].pieces[1]  # type: ignore[union-attr]
    assert document[piece.start : piece.end] == "555 0199"


@pytest.mark.parametrize(
    "interpret_as",
    [
        "characters",
        "spell-out",
        "cardinal",
        "number",
        "ordinal",
        "digits",
        "date",
        "time",
        "telephone",
        "currency",
    ],
)
def test_every_listed_say_as_is_taken(interpret_as: str) -> None:
    parse_ssml(f'<speak><say-as interpret-as="{interpret_as}">12</say-as></speak>')


def test_an_unknown_say_as_is_refused() -> None:
    error = refused('<speak>\n<say-as interpret-as="bleep">x</say-as></speak>')
    assert "'bleep'" in error.message and "line 2, column 1" in error.message


def test_a_say_as_the_normalizer_cannot_read_is_refused() -> None:
    def say_as(text: str, interpret_as: str, format: str | None, language: str) -> str:
        raise ValueError("not a date")

    with pytest.raises(InvalidRequest, match="not a date"):
        parse_ssml('<speak><say-as interpret-as="date">soon</say-as></speak>', say_as)


def test_markup_inside_say_as_is_refused() -> None:
    refused('<speak><say-as interpret-as="digits">1<break/>2</say-as></speak>')


def test_sub_says_its_alias_for_its_text() -> None:
    document = '<speak><sub alias="World Wide Web Consortium">W3C</sub> rules</speak>'
    markup = parse_ssml(document)
    assert said(document, markup) == ["World Wide Web Consortium rules"]
    piece = markup.parts[0].pieces[0]  # type: ignore[union-attr]
    assert document[piece.start : piece.end] == "W3C"
    refused('<speak><sub alias="">W3C</sub></speak>')


def test_phoneme_says_a_phoneme_block() -> None:
    document = '<speak>a <phoneme alphabet="ipa" ph="təˈmɑːtoʊ">tomato</phoneme></speak>'
    markup = parse_ssml(document)
    assert said(document, markup) == ["a [[ təˈmɑːtoʊ ]]"]
    piece = markup.parts[0].pieces[1]  # type: ignore[union-attr]
    assert piece.phoneme and document[piece.start : piece.end] == "tomato"


def test_a_phoneme_of_another_alphabet_or_invalid_ipa_is_refused() -> None:
    assert (
        "x-sampa"
        in refused('<speak><phoneme alphabet="x-sampa" ph="t@">a</phoneme></speak>').message
    )
    assert (
        "APOSTROPHE"
        in refused('<speak><phoneme alphabet="ipa" ph="t\'o">a</phoneme></speak>').message
    )
    assert "]" in refused('<speak><phoneme ph="a]] b">a</phoneme></speak>').message


def test_prosody_rate_sets_the_speed_and_other_attributes_are_reported() -> None:
    document = (
        '<speak>normal <prosody rate="slow" pitch="+10%">slow <prosody rate="150%">quick'
        "</prosody> slow again</prosody> normal</speak>"
    )
    markup = parse_ssml(document)
    speeds = [
        (said(document, Markup((p,)))[0], p.speed) for p in markup.parts if isinstance(p, Voiced)
    ]
    assert speeds == [
        ("normal", 1.0),
        ("slow", 0.75),
        ("quick", 1.5),
        ("slow again", 0.75),
        ("normal", 1.0),
    ]
    assert markup.ignored == ("prosody pitch",)


@pytest.mark.parametrize(
    ("value", "rate"),
    [
        ("x-slow", 0.5),
        ("fast", 1.25),
        ("80%", 0.8),
        ("1.2", 1.2),
        ("+10%", 1.1),
        ("-50%", 0.5),
        ("medium", 1.0),
        ("0.1", None),
        ("500%", None),
        ("quick", None),
        ("+2", None),
    ],
)
def test_prosody_rates(value: str, rate: float | None) -> None:
    result = parse_rate(value)
    assert result == pytest.approx(rate) if rate is not None else result is None


def test_a_bad_prosody_rate_is_refused() -> None:
    refused('<speak><prosody rate="warp">x</prosody></speak>')


def test_sentences_are_blocks_and_paragraphs_pause_between_them() -> None:
    document = "<speak><p><s>One.</s><s>Two.</s></p>\n<p>Three.</p></speak>"
    assert said(document, parse_ssml(document)) == ["One.", "Two.", 0.5, "Three."]


def test_ignored_markup_is_spoken_and_reported_never_read() -> None:
    document = (
        '<speak><emphasis level="strong">big</emphasis> <voice name="x">said</voice> '
        '<lang xml:lang="de-DE">Hallo</lang><mark name="m1"/> <audio src="a.wav">'
        "<desc>a bell</desc>ding</audio> <custom>odd</custom></speak>"
    )
    markup = parse_ssml(document)
    assert said(document, markup) == ["big said Hallo ding odd"]
    assert markup.ignored == ("emphasis", "voice", "lang", "audio", "unknown element <custom>")


def test_entities_cdata_and_comments_are_spoken_as_meant_and_map_to_their_source() -> None:
    document = "<speak>R&amp;D <!-- x --><![CDATA[<b>]]> caf&#233;</speak>"
    markup = parse_ssml(document)
    assert said(document, markup) == ["R&D <b> café"]


def test_offsets_are_characters_not_bytes() -> None:
    document = "<speak>Grüße <break time='1s'/> world</speak>"
    markup = parse_ssml(document)
    piece = markup.parts[2].pieces[0]  # type: ignore[union-attr]
    assert document[piece.start : piece.end].strip() == "world"


@pytest.mark.parametrize(
    ("document", "line", "column"),
    [
        ("<speak>Hello <b>world</speak>", 1, 24),
        ("<speak>\n  Hello\n  <break time='1s'>\n</speak>", 4, 3),
        ("<speak>a & b</speak>", 1, 11),
        ("<speak>ok</speak> trailing", 1, 19),
        ("<speak>&nbsp;</speak>", 1, 8),
    ],
)
def test_malformed_ssml_points_at_its_line_and_column(
    document: str, line: int, column: int
) -> None:
    assert f"line {line}, column {column}:" in refused(document).message


def test_the_root_must_be_speak() -> None:
    assert "<speak>" in refused("<talk>hi</talk>").message


def test_an_entity_bomb_is_refused_at_once() -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY a "aaaaaaaaaa">'
        + "".join(
            f'<!ENTITY {c} "&{p};&{p};&{p};&{p};&{p};&{p};&{p};&{p};&{p};&{p};">'
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + "]><speak>&i;</speak>"
    )
    error = refused(bomb)
    assert "DOCTYPE" in error.message  # refused before a single entity is declared


def test_an_external_entity_is_refused() -> None:
    refused('<!DOCTYPE speak SYSTEM "file:///etc/passwd"><speak>&x;</speak>')


def test_deep_nesting_is_refused() -> None:
    deep = "<speak>" + "<s>" * MAX_DEPTH + "x" + "</s>" * MAX_DEPTH + "</speak>"
    assert "deeper" in refused(deep).message
    ok = "<speak>" + "<prosody>" * (MAX_DEPTH - 2) + "x" + "</prosody>" * (MAX_DEPTH - 2)
    parse_ssml(ok + "</speak>")


def test_a_huge_document_is_refused() -> None:
    refused("<speak>" + "a" * 300_000 + "</speak>")


def test_elevenlabs_inline_break_and_phoneme_in_plain_text() -> None:
    text = (
        'Hello <break time="1.5s" /> I like '
        '<phoneme alphabet="ipa" ph="təˈmeɪtoʊ">tomato</phoneme>s.'
    )
    assert has_inline_tags(text)
    markup = parse_inline(text)
    assert said(text, markup) == ["Hello", 1.5, "I like [[ təˈmeɪtoʊ ]]s."]
    phoneme = markup.parts[2].pieces[1]  # type: ignore[union-attr]
    assert text[phoneme.start : phoneme.end] == "tomato"


def test_plain_text_has_no_inline_tags() -> None:
    assert not has_inline_tags("a < b and c > d, <b>bold</b>")


def test_a_bad_inline_tag_is_refused_where_it_is() -> None:
    with pytest.raises(InvalidRequest, match="line 2, column 4") as caught:
        parse_inline('Hi\nyo <break time="forever"/>')
    assert caught.value.code == "invalid_ssml"
    with pytest.raises(InvalidRequest, match="cmu"):
        parse_inline('<phoneme alphabet="cmu-arpabet" ph="T AH0">the</phoneme>')
