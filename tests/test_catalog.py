from __future__ import annotations

import pytest

from speechgate.catalog import Catalog, normalize
from speechgate.engines.base import Voice
from speechgate.errors import InvalidRequest, ModelNotFound, VoiceNotFound
from speechgate.workers.messages import EngineInfo

PIPER = EngineInfo("piper", 22050, False, (Voice("en_US-joe-medium", "Joe"),))
ESPEAK = EngineInfo("espeak", 22050, False, (Voice("en-us", "English"), Voice("en-us+f3", "f3")))


@pytest.fixture
def catalog() -> Catalog:
    return Catalog(
        {"piper": PIPER, "espeak": ESPEAK},
        {"tts-1": "piper", "tts-1-hd": "piper"},
        {
            "piper": {"alloy": "en_US-joe-medium", "nova": "missing-voice"},
            "espeak": {"alloy": "en-us+f3"},
        },
    )


def test_normalize_ignores_case_space_and_dash_vs_underscore() -> None:
    assert normalize(" EN-US_Joe ") == normalize("en_us-joe")


def test_models_resolve_by_engine_id_or_alias(catalog: Catalog) -> None:
    assert catalog.model("TTS-1").engine is PIPER
    assert catalog.model("espeak").engine is ESPEAK
    assert [m.id for m in catalog.models] == ["piper", "espeak", "tts-1", "tts-1-hd"]


def test_unknown_model_lists_the_known_ones(catalog: Catalog) -> None:
    with pytest.raises(ModelNotFound) as error:
        catalog.model("tts-9")
    assert error.value.status_code == 404
    assert "tts-1-hd" in error.value.message


def test_voices_resolve_per_engine(catalog: Catalog) -> None:
    assert catalog.voice("piper", "Alloy") == "en_US-joe-medium"
    assert catalog.voice("espeak", "alloy") == "en-us+f3"
    assert catalog.voice("espeak", "EN_US") == "en-us"


def test_alias_to_a_voice_the_engine_lacks_is_dropped(catalog: Catalog) -> None:
    with pytest.raises(VoiceNotFound):
        catalog.voice("piper", "nova")


def test_unknown_voice_is_400_on_voice_and_lists_the_valid_ones(catalog: Catalog) -> None:
    with pytest.raises(VoiceNotFound) as error:
        catalog.voice("piper", "echo")
    assert (error.value.status_code, error.value.param) == (400, "voice")
    assert "en_US-joe-medium, alloy" in error.value.message


def test_blends_resolve_each_voice_on_engines_that_blend() -> None:
    kokoro = EngineInfo(
        "kokoro", 24000, False, (Voice("jf_alpha", "a"), Voice("jm_kumo", "k")), blends_voices=True
    )
    catalog = Catalog({"kokoro": kokoro}, {}, {"kokoro": {"alloy": "jf_alpha"}})
    assert catalog.voice("kokoro", "alloy(2) + JM-kumo") == "jf_alpha(2)+jm_kumo(1)"
    with pytest.raises(VoiceNotFound):
        catalog.voice("kokoro", "alloy(2)+nobody(1)")
    with pytest.raises(InvalidRequest, match="malformed voice blend") as raised:
        catalog.voice("kokoro", "alloy(0)+jm_kumo")
    assert raised.value.param == "voice"


def test_engines_that_do_not_blend_take_a_blend_as_one_unknown_name(catalog: Catalog) -> None:
    with pytest.raises(VoiceNotFound):
        catalog.voice("espeak", "alloy(1)+en-us(1)")
