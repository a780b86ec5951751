# ruff: noqa: RUF001, RUF003 - IPA symbols look like Latin letters and punctuation
import pytest

from speechgate.text.phonemes import (
    Run,
    block,
    blocks,
    fit,
    invalid_ipa_symbols,
    is_ipa,
    plain,
    runs,
    stress_on_vowels,
    unspeakable,
)


def test_runs_cover_the_text_with_blocks_and_the_text_between() -> None:
    text = "Say [[ həˈloʊ ]] to[[ɡoʊ]]."
    assert runs(text) == [
        Run(0, 4),
        Run(4, 16, "həˈloʊ"),
        Run(16, 19),
        Run(19, 26, "ɡoʊ"),
        Run(26, 27),
    ]
    assert blocks(text) == [(4, 16), (19, 26)]
    assert runs("") == []


@pytest.mark.parametrize("text", ["a [[ b", "a ]] b", "[ [ x ] ]", "[[ a [[ b ]]"])
def test_a_bracket_pair_unclosed_or_nested_is_no_block(text: str) -> None:
    found = blocks(text)
    # "[[ a [[ b ]]": only the inner pair, with no bracket inside, is a block.
    assert found == ([(5, 12)] if text == "[[ a [[ b ]]" else [])


def test_block_writes_what_runs_reads() -> None:
    assert runs(block("həˈloʊ")) == [Run(0, 12, "həˈloʊ")]


@pytest.mark.parametrize(
    "ipa",
    [
        "həˈloʊ",
        "ˈwɜːld",
        "ðə ˈkwɪk ˈbɹaʊn ˈfɑks",
        "tʃɝtʃ",
        "t͡ʃ",  # tie bar
        "ʃaŋˈzɛlize",
        "ɡʁɑ̃",  # precomposed and combining nasal alike
        "kʰæt",
        "bʌʔn̩",
        "hə.ˈloʊ",  # syllable break
        "ma˥˩",  # tone letters
    ],
)
def test_ipa_is_ipa(ipa: str) -> None:
    assert invalid_ipa_symbols(ipa) == ""
    assert is_ipa(ipa)


@pytest.mark.parametrize(
    ("text", "invalid"),
    [
        ("hello1", "1"),
        ("HELLO", "HELO"),
        ("h@l'oU", "@'U"),  # espeak-ng's mnemonics are not IPA
        ("həˈloʊ ]]", "]"),
        ("<b>", "<>"),
        ("Ä", "Ä"),
    ],
)
def test_what_is_not_ipa_is_named_once_each(text: str, invalid: str) -> None:
    assert invalid_ipa_symbols(text) == invalid
    assert not is_ipa(text)


@pytest.mark.parametrize("blank", ["", "  "])
def test_blank_is_no_ipa_to_speak(blank: str) -> None:
    assert not is_ipa(blank)


IDENTITY = {symbol: symbol for symbol in "həlˈoʊ ɡɜːtʃç"}


def test_fit_keeps_what_the_engine_has() -> None:
    assert "".join(fit("həˈloʊ", IDENTITY)) == "həˈloʊ"


def test_fit_takes_the_longest_piece_the_engine_has_one_symbol_for() -> None:
    table = {"t": "t", "ʃ": "S", "tʃ": "tS", "ɜː": "3:", "ɜ": "3"}
    assert fit("tʃɜːtʃ", table) == ["tS", "3:", "tS"]


def test_fit_uses_a_stand_in_then_drops_what_it_cannot_place() -> None:
    # ASCII g for ɡ, "ɜː" for "ɝ" (without doubling the length after it), ʧ as t and ʃ;
    # "ʙ" has no stand-in and goes; the nasalizing tilde goes and leaves its vowel.
    assert "".join(fit("ɡ ɝː ʧ ʙ õ", IDENTITY)) == "ɡ ɜː tʃ  o"
    assert "".join(fit("g", {"ɡ": "ɡ"})) == "ɡ"


def test_fit_drops_breaks_which_an_engine_would_take_for_punctuation() -> None:
    assert "".join(fit("hə.ˈloʊ | ‖", {**IDENTITY, ".": ".", "|": "|"})) == "həˈloʊ  "


def test_fit_reads_a_precomposed_letter_as_the_engine_spells_it() -> None:
    assert fit("ç", {"ç": "ç"}) == ["ç"]
    assert fit("ç", {"c": "c", "\u0327": "\u0327"}) == ["c", "\u0327"]


def test_stress_moves_onto_the_vowel_as_espeak_writes_it() -> None:
    assert stress_on_vowels("həˈloʊ") == "həlˈoʊ"
    assert stress_on_vowels("ˈstɹɛŋkθ ˌɪnˈtu") == "stɹˈɛŋkθ ˌɪntˈu"
    assert stress_on_vowels("ˈ ˈst") == "ˈ ˈst"  # no vowel to move onto


def test_stray_brackets_and_ipa_symbols_are_unspeakable() -> None:
    text = "Say ]] həˈloʊ [[ now"
    assert unspeakable(text) == [(4, 6), (8, 9), (9, 10), (12, 13), (14, 16)]
    cleaned = plain(text)
    assert cleaned.spoken == "Say  hlo  now"
    now = cleaned.spoken.index("now")
    assert cleaned.source_span(now, now + 3) == (17, 20)


def test_letters_of_ordinary_orthographies_stay() -> None:
    for text in ("naïve café", "þorn ðe θ", "Straße", "ʻokina", "ŋ"):
        assert plain(text).spoken == text
    assert plain("Azərbaycan", "az").spoken == "Azərbaycan"
    assert plain("Azərbaycan", "en-us").spoken == "Azrbaycan"
