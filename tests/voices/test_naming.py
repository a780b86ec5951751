"""Language tags and what Kokoro and pocket-tts names say."""

from __future__ import annotations

import pytest

from speechgate.engines.kokoro import kokoro_gender, kokoro_language, kokoro_phoneme_language
from speechgate.engines.pocket import pocket_config_language
from speechgate.voices.naming import language_tag, matches_filter, speaks


@pytest.mark.parametrize(
    ("value", "tag"),
    [("en_us", "en-US"), ("EN-gb", "en-GB"), ("zh-hans", "zh-Hans"), ("es-419", "es-419")],
)
def test_languages_are_bcp47_tags(value: str, tag: str) -> None:
    assert language_tag(value) == tag


def test_language_filter_matches_the_primary_subtag_or_the_exact_region() -> None:
    assert matches_filter("de-DE", "de") and matches_filter("de-AT", "DE")
    assert matches_filter("en-GB", "en_gb") and not matches_filter("en-US", "en-GB")
    assert not matches_filter(None, "de")


def test_a_voice_speaks_its_primary_language_in_any_region() -> None:
    assert speaks("de-AT", "de-DE") and speaks("en-US", "en")
    assert not speaks(None, "en") and not speaks("en-US", "de")


def test_kokoro_voice_ids_spell_language_and_gender() -> None:
    assert (kokoro_language("bf_emma"), kokoro_gender("bf_emma")) == ("en-GB", "female")
    assert (kokoro_language("zm_yunxi"), kokoro_phoneme_language("zm_yunxi")) == ("zh", "cmn")
    assert kokoro_gender("am_adam") == "male"
    assert kokoro_language("alloy") is None and kokoro_gender("alloy") is None


def test_pocket_configs_are_named_by_language() -> None:
    assert pocket_config_language("german") == "de"
    assert pocket_config_language("english_2m_2026-10") == "en"
    assert pocket_config_language("klingon") is None and pocket_config_language(None) is None
