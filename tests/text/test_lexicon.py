# ruff: noqa: RUF001 - IPA in strings
import json
import pickle
from pathlib import Path

import pytest

from speechgate.text.ipa import InvalidIpa, check_ipa
from speechgate.text.lexicon import (
    MAX_BYTES,
    MAX_RULES,
    InvalidLexicon,
    Lexicon,
    load_lexicon,
    parse_pls,
    parse_rules_document,
)


def alias(grapheme: str, text: str, **flags: bool) -> dict[str, object]:
    return {"type": "alias", "string_to_replace": grapheme, "alias": text, **flags}


def phoneme(grapheme: str, ipa: str, **flags: bool) -> dict[str, object]:
    return {
        "type": "phoneme",
        "string_to_replace": grapheme,
        "phoneme": ipa,
        "alphabet": "ipa",
        **flags,
    }


@pytest.mark.parametrize("ipa", ["təˈmɑːtoʊ", "/ˈæpl̩/", "[ˌkuːbɚˈnɛtiːz]", "ˈɡɪf", "t͡ʃiz", "ç ã"])
def test_ipa_from_the_chart_is_taken(ipa: str) -> None:
    assert check_ipa(ipa) == ipa.strip("/[]")


@pytest.mark.parametrize(
    ("ipa", "named"),
    [
        ("h'ello", "APOSTROPHE"),
        ("tom:ato", "COLON"),
        ("TOMATO", "'T'"),
        ("a]]b", "']'"),
        ("x2", "'2'"),
        ("", "empty"),
        ("//", "empty"),
    ],
)
def test_what_is_not_ipa_is_named(ipa: str, named: str) -> None:
    with pytest.raises(InvalidIpa, match=named):
        check_ipa(ipa)


def test_aliases_replace_whole_words_longest_first_in_one_pass() -> None:
    lexicon = Lexicon.from_dicts(
        [alias("New York", "the big apple"), alias("New", "Neu"), alias("big", "BIG")]
    )
    rewrite = lexicon.apply("New York, New Yorker, Newt, renew.")
    assert rewrite.spoken == "the big apple, Neu Yorker, Newt, renew."
    start = rewrite.spoken.index("apple")
    assert rewrite.source_span(start, start + 5) == (0, 8)


def test_case_sensitivity_and_word_boundaries_are_per_rule() -> None:
    lexicon = Lexicon.from_dicts(
        [
            alias("nginx", "engine x", case_sensitive=False),
            alias("SQL", "sequel"),
            alias("ing", "ING", word_boundaries=False),
        ]
    )
    assert lexicon.apply("NGINX Nginx sql SQL singing").spoken == (
        "engine x engine x sql sequel sINGING"
    )


def test_phoneme_rules_give_phoneme_blocks_and_blocks_are_left_alone() -> None:
    lexicon = Lexicon.from_dicts([phoneme("tomato", "/təˈmɑːtoʊ/"), alias("a", "A")])
    assert lexicon.apply("a tomato [[ a tomato ]]").spoken == ("A [[ təˈmɑːtoʊ ]] [[ a tomato ]]")


def test_later_lexicons_win_for_the_same_grapheme() -> None:
    operator = Lexicon.from_dicts([alias("SG", "speech gate"), alias("TTS", "text to speech")])
    key = Lexicon.from_dicts([alias("SG", "es gee")])
    request = Lexicon.from_dicts([alias("TTS", "tee tee ess")])
    combined = Lexicon.combine(operator, key, None, request)
    assert combined.apply("SG TTS").spoken == "es gee tee tee ess"
    assert len(combined) == 2


def test_invalid_ipa_names_the_rule() -> None:
    with pytest.raises(InvalidLexicon, match=r"rule 1 \('tomato'\): invalid IPA.*APOSTROPHE"):
        Lexicon.from_dicts([alias("a", "b"), phoneme("tomato", "tə'mɑːto")])


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (alias("", "x"), "string_to_replace"),
        (alias("   ", "x"), "string_to_replace"),
        (alias("a", ""), "alias must be"),
        ({"type": "phoneme", "string_to_replace": "a", "phoneme": " "}, "phoneme must be"),
        ({"type": "spell", "string_to_replace": "a"}, "type must be"),
        ({**phoneme("a", "ə"), "alphabet": "cmu-arpabet"}, "alphabet"),
        ({**alias("a", "b"), "case_sensitive": "yes"}, "case_sensitive"),
        (alias("a", "[[ x ]]"), r"\[\["),
        ("a -> b", "not an object"),
    ],
)
def test_invalid_rules_are_refused(rule: object, message: str) -> None:
    with pytest.raises(InvalidLexicon, match=message):
        Lexicon.from_dicts([rule])


def test_aliases_that_loop_are_refused() -> None:
    with pytest.raises(InvalidLexicon, match="'A' -> 'B' -> 'C' -> 'A'"):
        Lexicon.from_dicts([alias("A", "x B"), alias("B", "C"), alias("C", "A")])
    with pytest.raises(InvalidLexicon, match="loop"):
        Lexicon.from_dicts([alias("A", "B"), alias("B", "A")])


def test_chains_without_a_loop_and_self_references_are_fine() -> None:
    lexicon = Lexicon.from_dicts([alias("A", "B"), alias("B", "C"), alias("Dr", "Dr.")])
    assert lexicon.apply("A B Dr").spoken == "B C Dr."  # applied once


def test_too_many_rules_are_refused() -> None:
    with pytest.raises(InvalidLexicon, match=str(MAX_RULES)):
        Lexicon.from_dicts([alias(f"w{i}", "x") for i in range(MAX_RULES + 1)])


def test_a_ten_megabyte_lexicon_is_refused_by_its_size_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = [alias(f"word{i}", "an alias " * 20) for i in range(60_000)]
    document = json.dumps(rules)
    assert len(document) > 10_000_000

    def unread(*_: object) -> None:
        raise AssertionError("a lexicon over the limit was parsed")

    monkeypatch.setattr(json, "loads", unread)
    with pytest.raises(InvalidLexicon, match="bytes"):
        parse_rules_document(document)
    path = tmp_path / "big.json"
    path.write_text(document)
    with pytest.raises(InvalidLexicon, match=f"at most {MAX_BYTES}"):
        load_lexicon(path)


def test_a_lexicon_of_the_largest_size_applies() -> None:
    lexicon = Lexicon.from_dicts([alias(f"word{i}", f"alias {i}") for i in range(MAX_RULES)])
    spoken = lexicon.apply("the word17 and word4999 but not sword17 " * 50).spoken
    assert spoken.count("alias 17") == 50 and spoken.count("alias 4999") == 50
    assert "sword17" in spoken


PLS = """<?xml version="1.0" encoding="UTF-8"?>
<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon"
    alphabet="ipa" xml:lang="en-US">
  <lexeme><grapheme>tomato</grapheme><grapheme>Tomato</grapheme>
    <phoneme>/tə'meɪtoʊ/</phoneme></lexeme>
  <lexeme><grapheme>UN</grapheme><alias>United Nations</alias></lexeme>
</lexicon>
"""


def test_pls_lexicons_load_with_their_graphemes() -> None:
    with pytest.raises(InvalidLexicon, match="APOSTROPHE"):
        parse_pls(PLS)
    lexicon = parse_pls(PLS.replace("'", "ˈ"))
    assert lexicon.apply("Tomato, tomato, TOMATO at the UN").spoken == (
        "[[ təˈmeɪtoʊ ]], [[ təˈmeɪtoʊ ]], TOMATO at the United Nations"
    )


def test_pls_with_a_dtd_or_broken_xml_is_refused() -> None:
    with pytest.raises(InvalidLexicon, match="DTD"):
        parse_pls('<!DOCTYPE lexicon [<!ENTITY a "b">]><lexicon>&a;</lexicon>')
    with pytest.raises(InvalidLexicon, match="line 1"):
        parse_pls("<lexicon><lexeme></lexicon>")
    with pytest.raises(InvalidLexicon, match="no phoneme or alias"):
        parse_pls("<lexicon><lexeme><grapheme>a</grapheme></lexeme></lexicon>")


def test_files_load_by_their_suffix(tmp_path: Path) -> None:
    (tmp_path / "l.pls").write_text(PLS.replace("'", "ˈ"))
    (tmp_path / "l.json").write_text(json.dumps({"rules": [alias("UN", "United Nations")]}))
    (tmp_path / "l.yaml").write_text("- {type: alias, string_to_replace: UN, alias: U N}\n")
    (tmp_path / "bad.yaml").write_text("rules: [\n")
    assert len(load_lexicon(tmp_path / "l.pls")) == 3
    assert load_lexicon(tmp_path / "l.json").apply("UN").spoken == "United Nations"
    assert load_lexicon(tmp_path / "l.yaml").apply("UN").spoken == "U N"
    with pytest.raises(InvalidLexicon, match=r"bad\.yaml: not valid YAML"):
        load_lexicon(tmp_path / "bad.yaml")


def test_rules_round_trip_in_elevenlabs_shape() -> None:
    rules = [
        {**alias("a", "b"), "case_sensitive": False, "word_boundaries": True},
        {**phoneme("c", "ə"), "case_sensitive": True, "word_boundaries": False},
    ]
    assert Lexicon.from_dicts(rules).to_dicts() == rules


def test_a_lexicon_crosses_to_a_worker_pickled_once_and_rebuilt_once() -> None:
    lexicon = Lexicon.from_dicts([alias(f"word{i}", f"alias {i}") for i in range(1000)])
    sent = pickle.dumps(lexicon)
    assert pickle.dumps(lexicon) == sent
    received = pickle.loads(sent)
    assert received == lexicon and received.apply("word7").spoken == "alias 7"
    # The next request's copy is the lexicon already rebuilt, not another one.
    assert pickle.loads(pickle.dumps(lexicon)) is received
    assert hash(received) == hash(lexicon)
