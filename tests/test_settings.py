from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from speechgate import settings as settings_module
from speechgate.engines import plugin as plugin_module
from speechgate.settings import OPENAI_MODELS, Settings
from speechgate.voices.installed import Manifest, install
from tests.helpers.audio import decode_audio
from tests.helpers.server import running_server, sdk_client


def test_environment_is_read_with_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEECHGATE_ENGINES", "espeak, piper")
    monkeypatch.setenv("SPEECHGATE_DEFAULT_ENGINE", "espeak")
    monkeypatch.setenv("SPEECHGATE_PORT", "9000")
    monkeypatch.setenv("SPEECHGATE_MODEL_ALIASES", '{"house": "piper"}')
    settings = Settings()
    assert settings.engines == ["espeak", "piper"]
    assert settings.port == 9000
    aliases = settings.resolved_model_aliases()
    assert {aliases[name] for name in OPENAI_MODELS} == {"espeak"}
    assert aliases["house"] == "piper"


@pytest.mark.parametrize(
    "values",
    [
        {"engines": ["festival"]},
        {"engines": ["espeak"], "default_engine": "piper"},
        {"engines": []},
        {"engines": ["piper", "espeak"], "model_aliases": {"tts-1": "kokoro"}},
        {"engine_options": {"festival": {"model": "x"}}},
        {"workers": 0},
        {"port": 70000},
        {"auth_mode": "tokens"},
        {"admin_key": "too-short"},
        {"usage_flush_interval": 0},
        {"limits_url": "127.0.0.1:6379"},
        {"limits_url": "postgresql://localhost/speechgate"},
    ],
)
def test_invalid_combinations_fail_at_start(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate(values)


def test_worker_count_defaults_to_usable_cores_per_worker() -> None:
    settings = Settings.model_validate({"cores_per_worker": 1})
    assert settings.worker_count >= 1
    assert Settings.model_validate({"workers": 3}).worker_count == 3


def test_the_store_defaults_to_sqlite_in_the_data_dir(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path).store_url == f"sqlite:///{tmp_path / 'speechgate.db'}"
    url = "postgresql://u:p@db/speechgate"
    assert Settings(data_dir=tmp_path, database_url=url).store_url == url


@pytest.mark.parametrize(
    "values",
    [
        {"ray_address": "head:6379"},  # Ray settings without the Ray backend
        {"ray_replicas": 2},
        {"backend": "ray", "queue_size": 0},  # Ray Serve's queue holds one at least
        {"backend": "ray", "ray_replicas": 3, "ray_max_replicas": 2},
        {"backend": "kubernetes"},
    ],
)
def test_invalid_ray_settings_fail_at_start(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate(values)


def test_ray_replicas_default_to_the_local_worker_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEECHGATE_BACKEND", "ray")
    monkeypatch.setenv("SPEECHGATE_RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.setenv("SPEECHGATE_WORKERS", "3")
    settings = Settings()
    assert (settings.backend, settings.ray_address) == ("ray", "10.0.0.1:6379")
    assert settings.replica_count == 3
    assert Settings(backend="ray", ray_replicas=2, ray_max_replicas=5).replica_count == 2


def only_importable(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make `modules` the only ones the settings find installed, whatever this venv holds."""

    def find_spec(name: str) -> object:
        return object() if name in modules else None

    monkeypatch.setattr(settings_module, "find_spec", find_spec)
    monkeypatch.setattr(plugin_module, "find_spec", find_spec)


def pull_pocket_model(data_dir: Path) -> None:
    """Install a (file-less) pocket item, as `speechgate voices pull pocket:english` would."""
    staging = data_dir / "staging"
    staging.mkdir(parents=True)
    manifest = Manifest("pocket:english", "pocket", "english", {}, (), 0, 0)
    install(staging, data_dir / "models", manifest)


@pytest.mark.parametrize(
    ("modules", "pocket_model", "engines"),
    [
        (("piper", "espeakng_loader"), False, ["piper", "espeak"]),  # the base install
        (("espeakng_loader", "pocket_tts"), True, ["espeak", "pocket"]),
        # pocket-tts installed without a model of its own could only fail to start.
        (("espeakng_loader", "pocket_tts"), False, ["espeak"]),
        (
            ("pocket_tts", "kokoro_onnx", "espeakng_loader", "piper"),
            True,
            ["piper", "espeak", "kokoro", "pocket"],
        ),
    ],
)
def test_the_default_engines_are_the_installed_ones(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    modules: tuple[str, ...],
    pocket_model: bool,
    engines: list[str],
) -> None:
    monkeypatch.delenv("SPEECHGATE_ENGINES", raising=False)
    monkeypatch.delenv("SPEECHGATE_DEFAULT_ENGINE", raising=False)
    monkeypatch.setenv("SPEECHGATE_DATA_DIR", str(tmp_path))
    only_importable(monkeypatch, *modules)
    if pocket_model:
        pull_pocket_model(tmp_path)
    settings = Settings()
    assert settings.engines == engines
    assert settings.default_engine == engines[0]


def test_pocket_configured_by_its_options_is_a_default_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SPEECHGATE_ENGINES", raising=False)
    monkeypatch.setenv("SPEECHGATE_DATA_DIR", str(tmp_path))
    only_importable(monkeypatch, "piper", "pocket_tts")
    settings = Settings(engine_options={"pocket": {"language": "english"}})
    assert settings.engines == ["piper", "pocket"]


def test_no_engine_installed_fails_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPEECHGATE_ENGINES", raising=False)
    only_importable(monkeypatch)
    with pytest.raises(ValidationError, match="no engine is installed"):
        Settings()


def test_the_default_engine_is_the_first_engine_unless_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SPEECHGATE_DEFAULT_ENGINE", raising=False)
    monkeypatch.setenv("SPEECHGATE_ENGINES", "pocket")
    settings = Settings()
    assert settings.default_engine == "pocket"
    assert {settings.resolved_model_aliases()[name] for name in OPENAI_MODELS} == {"pocket"}
    assert Settings(engines=["kokoro", "espeak"]).default_engine == "kokoro"
    assert Settings(engines=["kokoro", "espeak"], default_engine="espeak").default_engine == (
        "espeak"
    )


@pytest.mark.slow
def test_a_server_with_only_espeak_configured_speaks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SPEECHGATE_DEFAULT_ENGINE", raising=False)
    monkeypatch.setenv("SPEECHGATE_ENGINES", "espeak")
    monkeypatch.setenv("SPEECHGATE_WORKERS", "1")
    monkeypatch.setenv("SPEECHGATE_DATA_DIR", str(tmp_path))
    with (
        running_server(Settings()) as server,
        sdk_client(server) as client,
    ):
        speech = client.audio.speech.create(
            model="tts-1", voice="alloy", input="Only espeak here.", response_format="wav"
        )
        models = {model.id for model in client.models.list()}
    assert decode_audio(speech.content, "wav").rms > 0.01
    assert "piper" not in models


@pytest.mark.parametrize(
    ("values", "extra"),
    [
        ({"loudness_target_lufs": -16}, "loudness"),
        ({"wyoming_uri": "tcp://127.0.0.1:10200"}, "wyoming"),
        ({"database_url": "postgresql://u:p@db/speechgate"}, "postgres"),
    ],
)
def test_a_setting_whose_extra_is_missing_names_it(
    monkeypatch: pytest.MonkeyPatch, values: dict[str, object], extra: str
) -> None:
    only_importable(monkeypatch, "espeakng_loader")
    with pytest.raises(ValidationError, match=rf"install speechgate\[{extra}\]"):
        Settings.model_validate({"engines": ["espeak"], **values})


def test_an_invalid_operator_lexicon_fails_at_start(tmp_path: Path) -> None:
    good = tmp_path / "lexicon.json"
    good.write_text('[{"type": "alias", "string_to_replace": "nginx", "alias": "engine x"}]')
    assert Settings(lexicon_path=good).lexicon_path == good
    looping = tmp_path / "looping.yaml"
    looping.write_text(
        "- {type: alias, string_to_replace: A, alias: B}\n"
        "- {type: alias, string_to_replace: B, alias: A}\n"
    )
    with pytest.raises(ValidationError, match=r"lexicon_path: .*looping\.yaml: the aliases loop"):
        Settings(lexicon_path=looping)
