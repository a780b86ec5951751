from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from speechgate.catalog import Catalog, normalize
from speechgate.engines.base import EngineInfo, Voice
from speechgate.errors import (
    InvalidRequest,
    ModelNotFound,
    UnsupportedLanguage,
    VoiceNotFound,
    VoiceNotInstalled,
)
from speechgate.voices import installed
from speechgate.voices.installed import InstalledVoice, Manifest
from tests.helpers.settings import make_settings

PIPER = EngineInfo("piper", 22050, False, (Voice("en_US-joe-medium", "Joe"),), phonemes=True)
ESPEAK = EngineInfo(
    "espeak", 22050, False, (Voice("en-us", "English"), Voice("en-us+f3", "f3")), phonemes=True
)


@pytest.fixture
def catalog() -> Catalog:
    return Catalog(
        {"piper": PIPER, "espeak": ESPEAK},
        {"tts-1": "piper", "tts-1-hd": "piper"},
        {
            "piper": {
                "alloy": "en_US-joe-medium",
                "nova": "en_GB-missing-medium",
                "shimmer": "my-own-voice",
            },
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


def test_alias_to_a_voice_that_is_not_installed_says_how_to_pull_it(catalog: Catalog) -> None:
    with pytest.raises(VoiceNotInstalled) as error:
        catalog.voice("piper", "nova")
    assert (error.value.code, error.value.param) == ("voice_not_installed", "voice")
    assert "`speechgate voices pull piper:en_GB-missing-medium`" in error.value.message
    assert error.value.ref == "piper:en_GB-missing-medium"
    assert "nova" not in catalog.voice_names("piper")


def test_alias_to_a_name_no_pull_provides_suggests_no_pull(catalog: Catalog) -> None:
    # Not a Piper voice key: the hub has nothing under it, so no pull would help.
    with pytest.raises(VoiceNotInstalled) as error:
        catalog.voice("piper", "shimmer")
    assert error.value.ref is None
    assert "voices pull" not in error.value.message


def test_unknown_voice_is_400_on_voice_and_lists_the_valid_ones(catalog: Catalog) -> None:
    with pytest.raises(VoiceNotFound) as error:
        catalog.voice("piper", "echo")
    assert (error.value.status_code, error.value.param) == (400, "voice")
    assert "en_US-joe-medium, alloy" in error.value.message


def test_blends_resolve_each_voice_on_engines_that_blend() -> None:
    kokoro = EngineInfo(
        "kokoro",
        24000,
        False,
        (Voice("jf_alpha", "a"), Voice("jm_kumo", "k")),
        blends_voices=True,
        phonemes=True,
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


# --- installed voices, languages, generic names, model aliases ------------------------------


def install_piper(models: Path, key: str, language: str, gender: str | None = None) -> None:
    """A Piper item as `voices pull` leaves it; the catalog reads only its manifest, so the
    model files are empty placeholders."""
    staging = models / "piper" / f".staging-{key}"
    staging.mkdir(parents=True)
    files = {"model": f"{key}.onnx", "config": f"{key}.onnx.json"}
    for name in files.values():
        (staging / name).write_bytes(b"")
    quality = key.rsplit("-", 1)[-1]
    manifest = Manifest(
        ref=f"piper:{key}",
        engine="piper",
        name=key,
        files=files,
        voices=(InstalledVoice(key, language, quality, gender),),
        size_bytes=0,
        installed_at=0,
    )
    installed.install(staging, models, manifest)


JOE = EngineInfo("piper", 22050, False, (Voice("en_US-joe-medium", "Joe", "en-us"),), phonemes=True)
ESPEAK_DE = EngineInfo(
    "espeak",
    22050,
    False,
    (Voice("en-us", "English", "en-us"), Voice("de", "German", "de")),
    phonemes=True,
)


def installed_catalog(models: Path, *engines: EngineInfo) -> Catalog:
    settings = make_settings(engines=[e.name for e in engines], default_engine=engines[0].name)
    return Catalog(
        {e.name: e for e in engines},
        settings.resolved_model_aliases(),
        settings.voice_aliases,
        models,
    )


def test_installed_voices_merge_with_the_engines_own_and_refresh_at_run_time(
    tmp_path: Path,
) -> None:
    install_piper(tmp_path, "en_US-joe-medium", "en-US", "male")
    catalog = installed_catalog(tmp_path, JOE)
    [joe] = catalog.voices("piper")
    assert (joe.id, joe.language, joe.quality, joe.gender) == (
        "en_US-joe-medium",
        "en-US",
        "medium",
        "male",
    )
    with pytest.raises(VoiceNotFound):
        catalog.voice("piper", "de_DE-thorsten-medium")
    install_piper(tmp_path, "de_DE-thorsten-medium", "de_DE", "male")
    catalog.refresh()
    assert catalog.voice("piper", "DE-de-Thorsten-medium") == "de_DE-thorsten-medium"
    assert [v.language for v in catalog.voices("piper")] == ["en-US", "de-DE"]


def test_a_voice_installed_by_another_process_is_found_on_its_first_request(
    tmp_path: Path,
) -> None:
    # `speechgate voices pull` in another terminal: nothing calls `refresh` in this process.
    catalog = installed_catalog(tmp_path, JOE)
    with pytest.raises(VoiceNotFound):
        catalog.voice("piper", "de_DE-thorsten-medium")
    with pytest.raises(UnsupportedLanguage):
        catalog.voice("piper", "alloy", "de")
    install_piper(tmp_path, "de_DE-thorsten-medium", "de-DE", "male")
    assert catalog.voice("piper", "de_DE-thorsten-medium") == "de_DE-thorsten-medium"
    install_piper(tmp_path, "fr_FR-siwis-medium", "fr-FR", "female")
    assert catalog.voice("piper", "alloy", "fr") == "fr_FR-siwis-medium"
    install_piper(tmp_path, "en_GB-alan-medium", "en-GB", "male")
    assert "en_GB-alan-medium" in [voice.id for voice in catalog.voices("piper")]


def test_a_voice_pulled_again_or_removed_by_another_process_is_noticed(tmp_path: Path) -> None:
    install_piper(tmp_path, "de_DE-thorsten-medium", "de-DE", "male")
    catalog = installed_catalog(tmp_path, JOE)
    # Removed: the catalog still lists it until a request misses (the worker refuses it).
    shutil.rmtree(tmp_path / "piper" / "de_DE-thorsten-medium")
    with pytest.raises(VoiceNotFound):
        catalog.voice("piper", "de_DE-kerstin-low")
    assert "de_DE-thorsten-medium" not in [voice.id for voice in catalog.voices("piper")]


@pytest.fixture
def multilingual(tmp_path: Path) -> Catalog:
    install_piper(tmp_path, "de_DE-thorsten-medium", "de-DE", "male")
    install_piper(tmp_path, "de_DE-kerstin-low", "de-DE", "female")
    install_piper(tmp_path, "en_GB-alan-medium", "en-GB", "male")
    install_piper(tmp_path, "fr_FR-siwis-medium", "fr-FR")
    return installed_catalog(tmp_path, JOE, ESPEAK_DE)


@pytest.mark.parametrize(
    ("name", "language", "voice"),
    [
        ("alloy", "de", "de_DE-kerstin-low"),  # the alias table's de female voice
        ("onyx", "de-DE", "de_DE-thorsten-medium"),
        ("Male", "de", "de_DE-thorsten-medium"),
        ("en-US-Male", None, "en_US-joe-medium"),
        ("de_female", None, "de_DE-kerstin-low"),
        ("DE-de-male", "de", "de_DE-thorsten-medium"),
        ("echo", "en-GB", "en_GB-alan-medium"),  # exact region first
        ("alloy", "en-AU", "en_US-joe-medium"),  # no en-AU: English of any region
        ("nova", "fr", "fr_FR-siwis-medium"),  # no alias installed, no gender known: any
        ("en_US-joe-medium", "en", "en_US-joe-medium"),
        ("alloy", None, "en_US-joe-medium"),  # without a language, as before
    ],
)
def test_a_generic_voice_with_a_language_picks_a_voice_of_it(
    multilingual: Catalog, name: str, language: str | None, voice: str
) -> None:
    assert multilingual.voice("piper", name, language) == voice


def test_a_named_voice_of_another_language_is_refused(multilingual: Catalog) -> None:
    with pytest.raises(UnsupportedLanguage) as error:
        multilingual.voice("piper", "en_US-joe-medium", "de")
    assert (error.value.code, error.value.param) == ("unsupported_language", "language")
    assert "de_DE-thorsten-medium" in error.value.message
    assert "de (model 'espeak')" in error.value.message


def test_a_language_nothing_speaks_names_the_other_models_and_how_to_pull(
    multilingual: Catalog,
) -> None:
    with pytest.raises(UnsupportedLanguage) as error:
        multilingual.voice("espeak", "alloy", "fr")
    message = error.value.message
    assert "fr_FR-siwis-medium (model 'piper')" in message
    assert "speechgate voices search --language fr" in message
    with pytest.raises(UnsupportedLanguage) as error:
        multilingual.voice("piper", "alloy", "it")
    assert "`speechgate voices pull piper:it_IT-paola-medium`" in error.value.message


def test_a_generic_name_and_a_language_that_disagree_are_refused(multilingual: Catalog) -> None:
    with pytest.raises(UnsupportedLanguage):
        multilingual.voice("piper", "en_us_male", "de")


def test_a_generic_alias_whose_voice_is_not_installed_names_the_pull(
    multilingual: Catalog,
) -> None:
    with pytest.raises(VoiceNotInstalled) as error:
        multilingual.voice("piper", "en_us_female")
    assert "`speechgate voices pull piper:en_US-lessac-medium`" in error.value.message


KOKORO_JA = EngineInfo(
    "kokoro",
    24000,
    False,
    tuple(Voice(v, v, "ja") for v in ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jm_kumo")),
)
POCKET_ENGLISH = EngineInfo(
    "pocket", 24000, False, (Voice("alba", "alba", "en"), Voice("marius", "marius", "en"))
)


@pytest.mark.parametrize(
    ("engine", "name", "ref"),
    [
        # The seed client's exact call, on a server whose Kokoro is the embedded Japanese model.
        (KOKORO_JA, "af_heart", "kokoro"),
        (KOKORO_JA, "BM_Lewis", "kokoro"),
        (KOKORO_JA, "zf_xiaoxiao", "kokoro"),
        (POCKET_ENGLISH, "juergen", "pocket:german"),
        (POCKET_ENGLISH, "Estelle", "pocket:french"),
        (POCKET_ENGLISH, "bill_boerst", "pocket:english"),
    ],
)
def test_the_known_voices_of_a_model_not_installed_name_the_pull_that_brings_them(
    tmp_path: Path, engine: EngineInfo, name: str, ref: str
) -> None:
    catalog = installed_catalog(tmp_path, engine)
    model = catalog.model("kokoro-82m" if engine is KOKORO_JA else "pocket-tts")
    with pytest.raises(VoiceNotInstalled) as error:
        catalog.voice(model.engine.name, name)
    assert (error.value.status_code, error.value.code) == (400, "voice_not_installed")
    assert error.value.ref == ref
    assert f"`speechgate voices pull {ref}`" in error.value.message


def test_a_name_no_model_release_has_is_not_found(tmp_path: Path) -> None:
    # Spelled like a Kokoro voice, but none of v1.0's: no pull would bring it.
    catalog = installed_catalog(tmp_path, KOKORO_JA)
    with pytest.raises(VoiceNotFound):
        catalog.voice("kokoro", "af_nobody")


def test_the_names_of_other_servers_resolve_when_their_engine_is_loaded(tmp_path: Path) -> None:
    pocket = EngineInfo("pocket", 24000, False, (Voice("alba", "Alba"),))
    catalog = installed_catalog(tmp_path, JOE, pocket)
    for name in ("pocket-tts", "Pocket-TTS-HD", "pocket_tts_rt"):
        assert catalog.model(name).engine is pocket


@pytest.mark.parametrize(
    ("model", "words"),
    [
        ("pocket-tts", ["--engine pocket", "speechgate[pocket]", "voices pull pocket:english"]),
        ("kokoro-82m", ["--engine kokoro", "SPEECHGATE_ENGINES=piper,kokoro"]),
        ("kokoro", ["speechgate[kokoro]"]),
    ],
)
def test_a_known_model_not_loaded_is_404_saying_how_to_enable_it(
    tmp_path: Path, model: str, words: list[str]
) -> None:
    catalog = installed_catalog(tmp_path, JOE)
    with pytest.raises(ModelNotFound) as error:
        catalog.model(model)
    assert (error.value.status_code, error.value.code) == (404, "model_not_found")
    for word in words:
        assert word in error.value.message


def test_an_engine_of_the_base_install_not_loaded_needs_no_pip_install(tmp_path: Path) -> None:
    catalog = installed_catalog(tmp_path, JOE)
    with pytest.raises(ModelNotFound) as error:
        catalog.model("espeak")
    assert "SPEECHGATE_ENGINES=piper,espeak" in error.value.message
    assert "pip install" not in error.value.message
