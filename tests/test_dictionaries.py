"""The lexicon a request is read with: the operator's, under the dictionaries it names, found
for its key (another key's is not found), cached; and the service checking a request's text
with it before any work."""

# ruff: noqa: RUF001 - IPA in strings
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from speechgate.audio.formats import parse_format
from speechgate.catalog import Catalog
from speechgate.dictionaries import Dictionaries, Named, operator_lexicon
from speechgate.engines.base import EngineInfo, Voice
from speechgate.errors import InvalidRequest, NotFound
from speechgate.service import SpeechService
from speechgate.speech_request import DictionaryLocator, SpeechRequest
from speechgate.text.lexicon import Lexicon
from speechgate.text.prepare import TextOptions
from speechgate.workers.interface import StartupError
from tests.helpers.clock import Clock
from tests.helpers.settings import fake_settings

NGINX = {"type": "alias", "string_to_replace": "nginx", "alias": "engine x"}
TOMATO = {"type": "phoneme", "string_to_replace": "tomato", "phoneme": "təˈmɑːtoʊ"}
OPERATOR = Lexicon.from_dicts([NGINX, TOMATO, {**NGINX, "string_to_replace": "k8s", "alias": "K"}])


@dataclass(frozen=True)
class Stored:
    version_id: str
    rules: list[dict[str, Any]]


@dataclass
class FakeStore:
    """Dictionaries by id, each with its owner; counts the look-ups."""

    owned: dict[str, tuple[str | None, Stored]] = field(default_factory=dict)
    lookups: int = 0

    def find(self, dictionary_id: str, owner: str | None) -> Stored | None:
        self.lookups += 1
        found = self.owned.get(dictionary_id)
        return found[1] if found is not None and found[0] == owner else None


@pytest.fixture
def store() -> FakeStore:
    return FakeStore(
        {
            "pd_mine": ("key_a", Stored("v1", [{**NGINX, "alias": "N G I N X"}])),
            "pd_k8s": (
                "key_a",
                Stored("v2", [{**NGINX, "string_to_replace": "k8s", "alias": "kates"}]),
            ),
            "pd_theirs": ("key_b", Stored("v3", [NGINX])),
        }
    )


def named(dictionaries: Dictionaries, owner: str | None, *ids: str | tuple[str, str]) -> Named:
    locators = [
        DictionaryLocator(*item) if isinstance(item, tuple) else DictionaryLocator(item)
        for item in ids
    ]
    return asyncio.run(dictionaries.named(locators, owner))


def test_named_dictionaries_go_over_the_operators_lexicon_in_order(store: FakeStore) -> None:
    dictionaries = Dictionaries(OPERATOR, store.find)
    assert dictionaries.lexicon(named(dictionaries, "key_a"), True) is OPERATOR
    found = named(dictionaries, "key_a", "pd_mine", ("pd_k8s", "v2"))
    lexicon = dictionaries.lexicon(found, phonemes=True)
    assert lexicon.apply("nginx on k8s, a tomato").spoken == (
        "N G I N X on kates, a [[ təˈmɑːtoʊ ]]"
    )


def test_another_keys_or_an_unknown_dictionary_is_not_found(store: FakeStore) -> None:
    dictionaries = Dictionaries(OPERATOR, store.find)
    for owner, dictionary in [("key_a", "pd_theirs"), ("key_a", "pd_none"), (None, "pd_mine")]:
        with pytest.raises(NotFound) as refused:
            named(dictionaries, owner, dictionary)
        assert refused.value.status_code == 404
        assert refused.value.param == "pronunciation_dictionary_locators"
        assert repr(dictionary) in refused.value.message


def test_a_version_the_dictionary_lacks_and_four_locators_are_refused(store: FakeStore) -> None:
    dictionaries = Dictionaries(find=store.find)
    with pytest.raises(InvalidRequest) as wrong:
        named(dictionaries, "key_a", ("pd_mine", "v9"))
    assert wrong.value.status_code == 400 and "'v1'" in wrong.value.message
    with pytest.raises(InvalidRequest, match="at most 3"):
        named(dictionaries, "key_a", *["pd_mine"] * 4)


def test_found_dictionaries_are_cached_until_their_time_is_up(store: FakeStore) -> None:
    clock = Clock()
    dictionaries = Dictionaries(find=store.find, ttl=60.0, clock=clock)
    first = named(dictionaries, "key_a", "pd_mine")
    named(dictionaries, "key_a", "pd_mine")
    assert store.lookups == 1
    clock.advance(61.0)
    again = named(dictionaries, "key_a", "pd_mine")
    assert store.lookups == 2
    # Its rules cannot have changed under the same version: not parsed again.
    assert again.lexicons[0] is first.lexicons[0]
    del store.owned["pd_mine"]
    named(dictionaries, "key_a", "pd_mine")  # still cached
    dictionaries.forget("pd_mine")
    with pytest.raises(NotFound):
        named(dictionaries, "key_a", "pd_mine")


def test_the_operators_phoneme_rules_are_left_out_for_an_engine_without_phonemes() -> None:
    dictionaries = Dictionaries(OPERATOR)
    without = dictionaries.lexicon(Named(), phonemes=False)
    assert without.apply("nginx tomato").spoken == "engine x tomato"


def test_an_unreadable_operator_lexicon_fails_start_up_naming_it(tmp_path: Path) -> None:
    assert not operator_lexicon(None)
    bad = tmp_path / "lexicon.json"
    bad.write_text(
        '[{"type": "alias", "string_to_replace": "A", "alias": "B"}, '
        '{"type": "alias", "string_to_replace": "B", "alias": "A"}]'
    )
    with pytest.raises(StartupError, match=r"lexicon_path: .*lexicon\.json: the aliases loop"):
        operator_lexicon(bad)
    with pytest.raises(StartupError, match="lexicon_path: "):
        operator_lexicon(tmp_path / "missing.json")


# --- the service --------------------------------------------------------------------------

SPEAKS_PHONEMES = EngineInfo("espeak", 22050, False, (Voice("en-us", "English"),), phonemes=True)
NO_PHONEMES = EngineInfo("pocket", 24000, False, (Voice("alba", "Alba"),))


def service(store: FakeStore) -> SpeechService:
    catalog = Catalog({"espeak": SPEAKS_PHONEMES, "pocket": NO_PHONEMES}, {}, {})
    dictionaries = Dictionaries(OPERATOR, store.find)
    return SpeechService(fake_settings(), catalog, pools={}, dictionaries=dictionaries)


def speech(model: str, text: str, *dictionaries: str) -> SpeechRequest:
    return SpeechRequest(
        model=model,
        voice="en-us" if model == "espeak" else "alba",
        format=parse_format("pcm"),
        text=text,
        dictionaries=tuple(DictionaryLocator(name) for name in dictionaries),
    )


def options(plan_text: TextOptions | None) -> TextOptions:
    assert plan_text is not None
    return plan_text


def test_a_plan_carries_the_lexicon_to_its_worker(store: FakeStore) -> None:
    planned = asyncio.run(
        service(store).plan_or_pull(speech("espeak", "nginx, tomato", "pd_mine"), "key_a")
    )
    text = options(planned.request.text_options)
    assert text.lexicon.apply("nginx, tomato").spoken == "N G I N X, [[ təˈmɑːtoʊ ]]"
    assert text.lexicon_param == "pronunciation_dictionary_locators"
    # Without dictionaries: the operator's, on an engine without phonemes its aliases only.
    plain = service(store).plan(speech("pocket", "nginx, tomato"))
    assert options(plain.request.text_options).lexicon.apply("nginx tomato").spoken == (
        "engine x tomato"
    )


def test_a_named_phoneme_rule_on_an_engine_without_phonemes_is_refused_in_planning(
    store: FakeStore,
) -> None:
    store.owned["pd_ipa"] = ("key_a", Stored("v4", [TOMATO]))
    with pytest.raises(InvalidRequest) as refused:
        asyncio.run(service(store).plan_or_pull(speech("pocket", "A tomato.", "pd_ipa"), "key_a"))
    assert refused.value.code == "phonemes_unsupported"
    assert "'pocket'" in refused.value.message
    assert refused.value.param == "pronunciation_dictionary_locators"
    # Where it does not match, or on an engine with phonemes, nothing is refused.
    asyncio.run(service(store).plan_or_pull(speech("pocket", "A potato.", "pd_ipa"), "key_a"))
    asyncio.run(service(store).plan_or_pull(speech("espeak", "A tomato.", "pd_ipa"), "key_a"))


def test_invalid_ssml_is_refused_in_planning_and_ignored_markup_named(store: FakeStore) -> None:
    with pytest.raises(InvalidRequest) as refused:
        service(store).plan(speech("espeak", "<speak>Hello <break time='1s'></speak>"))
    assert refused.value.code == "invalid_ssml"
    with pytest.raises(InvalidRequest, match="'pocket'"):
        service(store).plan(speech("pocket", '<speak><phoneme ph="təˈmɑːtoʊ">x</phoneme></speak>'))
    planned = service(store).plan(
        speech("espeak", "<speak><emphasis>Hello</emphasis> <voice name='x'>you</voice></speak>")
    )
    assert planned.ssml_ignored == ("emphasis", "voice")
