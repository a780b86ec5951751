# ruff: noqa: RUF001 - IPA in strings
import re

import pytest

from speechgate.errors import InvalidRequest
from speechgate.text.lexicon import Lexicon
from speechgate.text.prepare import Prepared, Silence, Speech, TextOptions, prepare
from speechgate.text.rewrite import Rewrite

PLAIN = TextOptions(normalize=False)


def fake_normalize(text: str, language: str = "en") -> Rewrite:
    """Numbers as "<n>" words, so the test sees where normalization ran."""
    return Rewrite.from_replacements(
        text, [(m.start(), m.end(), f"number {m.group()}") for m in re.finditer(r"\d+", text)]
    )


def fake_say_as(text: str, interpret_as: str, format: str | None, language: str) -> str:
    if interpret_as == "characters":
        return " ".join(text)
    return f"{interpret_as}:{text}"


def spoken(blocks: Prepared) -> list[object]:
    return [b.rewrite.spoken if isinstance(b, Speech) else b.seconds for b in blocks]


def source_of(block: Speech, word: str) -> str:
    start = block.rewrite.spoken.index(word)
    begin, end = block.rewrite.source_span(start, start + len(word))
    return block.rewrite.source[begin:end]


@pytest.mark.parametrize(
    "text", ["Hello   world <b>!</b> 5 [[ x ]] & ", "", "  ", "<speak", "a < b > c"]
)
def test_plain_text_is_left_exactly_as_it_is(text: str) -> None:
    blocks = prepare(text, PLAIN, normalize=fake_normalize)
    assert blocks == (Speech(Rewrite.identity(text), 1.0),)
    assert blocks.ignored == ()


def test_normalization_runs_only_when_asked() -> None:
    on = prepare("I have 5 cats", TextOptions(normalize=True), normalize=fake_normalize)
    assert spoken(on) == ["I have number 5 cats"]
    assert source_of(on[0], "number 5") == "5"  # type: ignore[arg-type]


def test_words_after_a_break_map_to_their_characters_in_the_document() -> None:
    document = '<speak>Hello <break time="1s"/> world</speak>'
    blocks = prepare(document, PLAIN)
    assert spoken(blocks) == ["Hello", 1.0, "world"]
    world = blocks[2]
    assert isinstance(world, Speech) and world.rewrite.source == document
    begin, end = world.rewrite.source_span(0, 5)
    assert (begin, end) == (document.index("world"), document.index("world") + 5)


def test_ssml_is_detected_or_chosen() -> None:
    document = "<speak>Hi <sub alias='there'>you</sub></speak>"
    assert spoken(prepare(document, PLAIN)) == ["Hi there"]
    assert spoken(
        prepare(document, TextOptions(normalize=False, ssml=False, inline_tags=False))
    ) == [document]
    with pytest.raises(InvalidRequest, match="not a <speak> document") as caught:
        prepare("Hi", TextOptions(ssml=True))
    assert caught.value.code == "invalid_ssml"


def test_say_as_sub_lexicon_and_normalizer_apply_in_order() -> None:
    document = (
        '<speak>Order <say-as interpret-as="characters">AB</say-as> for 3 '
        '<sub alias="WWW">the web</sub> at ACME.</speak>'
    )
    lexicon = Lexicon.from_dicts(
        [
            {"type": "alias", "string_to_replace": "ACME", "alias": "acme 2"},
            {"type": "alias", "string_to_replace": "WWW", "alias": "dub dub dub"},
        ]
    )
    blocks = prepare(
        document,
        TextOptions(lexicon=lexicon),
        normalize=fake_normalize,
        say_as=fake_say_as,
    )
    assert spoken(blocks) == ["Order A B for number 3 dub dub dub at acme number 2."]
    block = blocks[0]
    assert isinstance(block, Speech)
    assert source_of(block, "A B") == "AB"
    assert source_of(block, "number 3") == "3"
    assert source_of(block, "dub dub dub") == "the web"
    assert source_of(block, "acme number 2") == "ACME"


def test_prosody_rate_is_the_blocks_speed_and_ignored_markup_is_reported() -> None:
    document = (
        '<speak>Normal. <prosody rate="x-slow" volume="loud">Slow.</prosody> '
        "<emphasis>Again.</emphasis></speak>"
    )
    blocks = prepare(document, PLAIN)
    assert [(b.rewrite.spoken, b.speed) for b in blocks if isinstance(b, Speech)] == [
        ("Normal.", 1.0),
        ("Slow.", 0.5),
        ("Again.", 1.0),
    ]
    assert blocks.ignored == ("prosody volume", "emphasis")


def test_breaks_and_paragraphs_are_silences() -> None:
    document = (
        "<speak><p>One.</p><p>Two. <break strength='strong'/>Three.</p>"
        "<break time='250ms'/></speak>"
    )
    blocks = prepare(document, PLAIN)
    assert spoken(blocks) == ["One.", 0.5, "Two.", 1.0, "Three.", 0.25]
    assert all(isinstance(b, Silence) for b in blocks[1::2])


def test_phonemes_are_refused_for_an_engine_without_them() -> None:
    document = '<speak><phoneme alphabet="ipa" ph="ˈpiːkɑːn">pecan</phoneme></speak>'
    assert spoken(prepare(document, TextOptions(normalize=False, phonemes=True))) == [
        "[[ ˈpiːkɑːn ]]"
    ]
    with pytest.raises(InvalidRequest, match="'pocket'") as caught:
        prepare(document, TextOptions(phonemes=False, engine="pocket"))
    assert (caught.value.code, caught.value.param) == ("phonemes_unsupported", "input")


def test_a_matching_phoneme_rule_is_refused_naming_the_lexicon_param() -> None:
    lexicon = Lexicon.from_dicts(
        [{"type": "phoneme", "string_to_replace": "pecan", "phoneme": "pɪˈkɑːn"}]
    )
    options = TextOptions(
        lexicon=lexicon, engine="pocket", lexicon_param="pronunciation_dictionary_locators"
    )
    assert spoken(prepare("no nuts", options, normalize=fake_normalize)) == ["no nuts"]
    with pytest.raises(InvalidRequest) as caught:
        prepare("a pecan pie", options, normalize=fake_normalize)
    assert caught.value.code == "phonemes_unsupported"
    assert caught.value.param == "pronunciation_dictionary_locators"
    with_phonemes = TextOptions(lexicon=lexicon, phonemes=True, normalize=False)
    blocks = prepare("a pecan pie", with_phonemes)
    assert spoken(blocks) == ["a [[ pɪˈkɑːn ]] pie"]
    assert source_of(blocks[0], "[[ pɪˈkɑːn ]]") == "pecan"  # type: ignore[arg-type]


def test_elevenlabs_inline_tags_are_honoured_in_plain_text() -> None:
    text = 'Wait <break time="1.5s" /> for <phoneme alphabet="ipa" ph="ˈpiːkɑːn">pecan</phoneme>.'
    blocks = prepare(text, TextOptions(normalize=False, phonemes=True))
    assert spoken(blocks) == ["Wait", 1.5, "for [[ ˈpiːkɑːn ]]."]
    assert source_of(blocks[2], "for") == "for"  # type: ignore[arg-type]
    off = TextOptions(normalize=False, inline_tags=False)
    assert spoken(prepare(text, off)) == [text]


def test_invalid_ssml_is_a_request_error() -> None:
    with pytest.raises(InvalidRequest, match="line 1, column") as caught:
        prepare("<speak>Hello <b>world</speak>", TextOptions())
    assert (caught.value.param, caught.value.code) == ("input", "invalid_ssml")


def test_the_real_normalizer_speaks_say_as_and_plain_numbers() -> None:
    document = '<speak>Room <say-as interpret-as="cardinal">12</say-as> costs $5.</speak>'
    blocks = prepare(document, TextOptions())
    assert isinstance(blocks[0], Speech)
    said = blocks[0].rewrite.spoken
    assert "twelve" in said and "five dollars" in said and "<" not in said
    assert source_of(blocks[0], "twelve") == "12"
