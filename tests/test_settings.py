from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from speechgate import settings as settings_module
from speechgate.engines import plugin as plugin_module
from speechgate.settings import MOVED, OPENAI_MODELS, Settings, new_variable
from speechgate.voices.installed import Manifest, install
from tests.helpers.audio import decode_audio
from tests.helpers.server import running_server, sdk_client


def test_environment_is_read_with_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEECHGATE_ENGINES", "espeak, piper")
    monkeypatch.setenv("SPEECHGATE_DEFAULT_ENGINE", "espeak")
    monkeypatch.setenv("SPEECHGATE_SERVER__PORT", "9000")
    monkeypatch.setenv("SPEECHGATE_MODEL_ALIASES", '{"house": "piper"}')
    settings = Settings()
    assert settings.engines == ["espeak", "piper"]
    assert settings.server.port == 9000
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
        {"pool": {"workers": 0}},
        {"server": {"port": 70000}},
        {"auth": {"mode": "tokens"}},
        {"auth": {"admin_key": "too-short"}},
        {"usage": {"flush_interval": 0}},
        {"store": {"limits_url": "127.0.0.1:6379"}},
        {"store": {"limits_url": "postgresql://localhost/speechgate"}},
        {"server": {"max_connections": 10}, "wyoming": {"uri": "tcp://h:1", "max_connections": 10}},
        {"workers": 0},  # an old name is checked as its new one is
    ],
)
def test_invalid_combinations_fail_at_start(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate(values)


def test_worker_count_defaults_to_usable_cores_per_worker() -> None:
    settings = Settings.model_validate({"pool": {"cores_per_worker": 1}})
    assert settings.pool.worker_count >= 1
    assert Settings.model_validate({"pool": {"workers": 3}}).pool.worker_count == 3


def test_the_store_defaults_to_sqlite_in_the_data_dir(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path).store_url == f"sqlite:///{tmp_path / 'speechgate.db'}"
    url = "postgresql://u:p@db/speechgate"
    assert Settings(data_dir=tmp_path, store={"database_url": url}).store_url == url


@pytest.mark.parametrize(
    "values",
    [
        {"ray": {"address": "head:6379"}},  # Ray settings without the Ray backend
        {"ray": {"replicas": 2}},
        {"pool": {"backend": "ray", "queue_size": 0}},  # Ray Serve's queue holds one at least
        {"pool": {"backend": "ray"}, "ray": {"replicas": 3, "max_replicas": 2}},
        {"pool": {"backend": "kubernetes"}},
    ],
)
def test_invalid_ray_settings_fail_at_start(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate(values)


def test_ray_replicas_default_to_the_local_worker_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEECHGATE_POOL__BACKEND", "ray")
    monkeypatch.setenv("SPEECHGATE_RAY__ADDRESS", "10.0.0.1:6379")
    monkeypatch.setenv("SPEECHGATE_POOL__WORKERS", "3")
    settings = Settings()
    assert (settings.pool.backend, settings.ray.address) == ("ray", "10.0.0.1:6379")
    assert settings.replica_count == 3
    assert (
        Settings(pool={"backend": "ray"}, ray={"replicas": 2, "max_replicas": 5}).replica_count == 2
    )


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
    monkeypatch.setenv("SPEECHGATE_POOL__WORKERS", "1")
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
        ({"audio": {"loudness_target_lufs": -16}}, "loudness"),
        ({"wyoming": {"uri": "tcp://127.0.0.1:10200"}}, "wyoming"),
        ({"store": {"database_url": "postgresql://u:p@db/speechgate"}}, "postgres"),
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
    assert Settings(text={"lexicon_path": good}).text.lexicon_path == good
    looping = tmp_path / "looping.yaml"
    looping.write_text(
        "- {type: alias, string_to_replace: A, alias: B}\n"
        "- {type: alias, string_to_replace: B, alias: A}\n"
    )
    with pytest.raises(ValidationError, match=r"lexicon_path: .*looping\.yaml: the aliases loop"):
        Settings(text={"lexicon_path": looping})


# --- settings grouped by concern, and the flat names of before ------------------------------

FILE = "{file}"  # stands for a file that exists (a lexicon, a CA bundle, a routes file)
ON_RAY = {"SPEECHGATE_POOL__BACKEND": "ray"}
WITH_WYOMING = {"SPEECHGATE_WYOMING__URI": "tcp://127.0.0.1:10200"}
WITH_LLM = {"SPEECHGATE_LLM__BASE_URL": "http://127.0.0.1:11434/v1"}

OLD_VARIABLES: dict[str, tuple[str, dict[str, str]]] = {
    # old name: (a value other than its default, the other variables it needs)
    "host": ("0.0.0.0", {}),
    "port": ("9001", {}),
    "max_connections": ("500", {}),
    "max_body_bytes": ("2048", {}),
    "max_header_bytes": ("2048", {}),
    "header_timeout": ("3", {}),
    "body_timeout": ("4", {}),
    "shutdown_grace": ("5", {}),
    "playground": ("false", {}),
    "log_format": ("json", {}),
    "log_level": ("debug", {}),
    "backend": ("ray", {}),
    "workers": ("3", {}),
    "cores_per_worker": ("2", {}),
    "worker_cores": ("0,1", {}),
    "elastic_threads": ("false", {}),
    "jobs_per_worker": ("2", {}),
    "loaded_voices": ("6", {}),
    "queue_size": ("5", {}),
    "max_queue_wait": ("7", {}),
    "max_retry_after": ("8", {}),
    "stall_timeout": ("9", {}),
    "job_timeout": ("11", {}),
    "slow_reader_timeout": ("12", {}),
    "ray_address": ("head:6379", ON_RAY),
    "ray_replicas": ("2", ON_RAY),
    "ray_max_replicas": ("50", ON_RAY),
    "ray_health_check_period": ("3", {}),
    "max_input_chars": ("100", {}),
    "text_normalization": ("false", {}),
    "lexicon_path": (FILE, {}),
    "default_sample_rate": ("16000", {}),
    "loudness_target_lufs": ("-18", {}),
    "phrase_cache_bytes": ("0", {}),
    "phrase_cache_random": ("true", {}),
    "phrase_preload": ("Hello there.\nGoodbye.", {}),
    "phrase_preload_voices": ("alloy, echo", {}),
    "auto_pull": ("true", {}),
    "hub_endpoint": ("https://hf-mirror.com", {}),
    "clone_min_speech_seconds": ("2", {}),
    "clone_max_upload_bytes": ("4096", {}),
    "clone_max_decodes": ("3", {}),
    "llm_base_url": ("http://127.0.0.1:11434/v1", {}),
    "llm_api_key": ("sk-upstream", WITH_LLM),
    "llm_ca_bundle": (FILE, WITH_LLM),
    "llm_timeout": ("5", {}),
    "auth_mode": ("keys", {}),
    "admin_key": ("a" * 32, {}),
    "key_cache_ttl": ("1", {}),
    "database_url": ("sqlite:////srv/speechgate.db", {}),
    "limits_url": ("redis://127.0.0.1:6379/0", {}),
    "usage_metering": ("false", {}),
    "usage_flush_interval": ("2", {}),
    "prices": ('{"local/tts-1": 0.5}', {}),
    "compute_cost_per_hour": ("0.5", {}),
    "reference_prices": ('{"Elsewhere": 1.0}', {}),
    "session_check_interval": ("2", {}),
    "max_session_seconds": ("60", {}),
    "session_max_lead_seconds": ("1", {}),
    "wyoming_uri": ("tcp://127.0.0.1:10200", {}),
    "wyoming_zeroconf": ("true", WITH_WYOMING),
    "wyoming_principal": ("key_house", WITH_WYOMING),
    "wyoming_max_connections": ("3", WITH_WYOMING),
    "wyoming_idle_timeout": ("5", {}),
    "routes_file": (FILE, {}),
    "otel_endpoint": ("http://127.0.0.1:4318", {}),
}


def test_every_old_name_has_a_place_in_a_group() -> None:
    assert set(OLD_VARIABLES) == set(MOVED)
    for old, (group, name) in MOVED.items():
        assert old not in Settings.model_fields
        model = Settings.model_fields[group].annotation
        assert isinstance(model, type) and name in model.model_fields


@pytest.mark.parametrize("old", list(OLD_VARIABLES))
def test_an_old_variable_is_read_into_its_group_and_warned_about_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path, old: str
) -> None:
    monkeypatch.setattr(settings_module, "_warned", set())
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    file = tmp_path / "file.json"
    file.write_text("[]")  # an empty lexicon, an empty CA bundle, no routes: enough to exist
    raw, needs = OLD_VARIABLES[old]
    raw = raw.replace(FILE, str(file))
    for variable, value in needs.items():
        monkeypatch.setenv(variable, value)
    group, name = MOVED[old]
    new = new_variable(group, name)
    monkeypatch.setenv(new, raw)
    expected = getattr(Settings(), group)
    monkeypatch.delenv(new)
    monkeypatch.setenv(f"SPEECHGATE_{old.upper()}", raw)
    with caplog.at_level(logging.WARNING, logger="speechgate.settings"):
        read, read_again = Settings(), Settings()
    assert getattr(read, group) == getattr(read_again, group) == expected
    assert getattr(expected, name) != getattr(type(expected)(), name)  # not merely the default
    warnings = [record.getMessage() for record in caplog.records]
    assert warnings == [f"setting SPEECHGATE_{old.upper()} is deprecated: use {new}"]


def test_a_groups_own_variable_wins_over_its_old_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEECHGATE_MAX_INPUT_CHARS", "100")
    monkeypatch.setenv("SPEECHGATE_TEXT__MAX_INPUT_CHARS", "200")
    monkeypatch.setenv("SPEECHGATE_TEXT_NORMALIZATION", "false")
    settings = Settings()
    assert settings.text.max_input_chars == 200
    assert settings.text.normalization is False  # the rest of the group still read


def test_old_keywords_land_in_their_group_warned_about_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(settings_module, "_warned", set())
    monkeypatch.setenv("SPEECHGATE_POOL__WORKERS", "5")
    monkeypatch.setenv("SPEECHGATE_POOL__QUEUE_SIZE", "7")
    with caplog.at_level(logging.WARNING, logger="speechgate.settings"):
        settings = Settings(workers=2, max_input_chars=100, pool={"jobs_per_worker": 3})
        Settings(workers=3)
    # A keyword outranks the environment, field by field: the queue size is still read.
    assert (settings.pool.workers, settings.pool.jobs_per_worker) == (2, 3)
    assert settings.pool.queue_size == 7
    assert settings.text.max_input_chars == 100
    assert [record.getMessage() for record in caplog.records] == [
        "setting Settings(workers=...) is deprecated: use Settings(pool={'workers': ...})",
        "setting Settings(max_input_chars=...) is deprecated: use "
        "Settings(text={'max_input_chars': ...})",
    ]


def test_a_nested_value_is_read_from_a_settings_file(tmp_path: Path) -> None:
    dotenv = tmp_path / "speechgate.env"
    dotenv.write_text(
        "SPEECHGATE_LLM__BASE_URL=http://127.0.0.1:11434/v1\n"
        "SPEECHGATE_POOL__WORKER_CORES=0,1\n"
        'SPEECHGATE_USAGE__PRICES={"local/tts-1": 0.5}\n'
    )
    settings = Settings(_env_file=dotenv)  # type: ignore[call-arg]
    assert settings.llm.base_url == "http://127.0.0.1:11434/v1"
    assert settings.pool.worker_cores == [0, 1]
    assert settings.usage.prices == {"local/tts-1": 0.5}


@pytest.mark.parametrize(
    ("variable", "value", "where"),
    [
        ("SPEECHGATE_POOL__WORKERS", "0", ("pool", "workers")),
        ("SPEECHGATE_WORKERS", "0", ("pool", "workers")),
        ("SPEECHGATE_WYOMING__URI", "http://house:10200", ("wyoming", "uri")),
        ("SPEECHGATE_ENGINES", "festival", ()),
    ],
)
def test_invalid_values_are_refused_at_their_new_place(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, where: tuple[str, ...]
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert refused.value.errors()[0]["loc"] == where
