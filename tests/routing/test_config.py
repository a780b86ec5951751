"""The routes file: YAML or TOML, validated as a whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from speechgate.routing.config import (
    ElevenLabsProviderConfig,
    LocalProviderConfig,
    RemoteProviderConfig,
    load_routes,
)

YAML = """
providers:
  local: {kind: local, model: espeak}
  upstream:
    kind: remote
    base_url: http://127.0.0.1:9/v1
    api_key: sk-secret
    voices: {alloy: nova}
breaker: {error_rate: 0.05, min_requests: 5}
routes:
  tts-1:
    providers: {local: 95, upstream: 5}
    fallback: [local]
    shadow: {provider: upstream, percent: 10}
"""

TOML = """
[providers.local]
kind = "local"

[providers.upstream]
kind = "remote"
base_url = "https://tts.example/v1"

[routes.tts-1]
providers = {local = 50, upstream = 50}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml(tmp_path: Path) -> None:
    config = load_routes(write(tmp_path, "routes.yaml", YAML))
    local, upstream = config.providers["local"], config.providers["upstream"]
    assert isinstance(local, LocalProviderConfig) and local.model == "espeak"
    assert isinstance(upstream, RemoteProviderConfig)
    assert upstream.voices == {"alloy": "nova"}
    assert config.breaker.error_rate == 0.05 and config.breaker.window == 60
    route = config.routes["tts-1"]
    assert route.providers == {"local": 95, "upstream": 5}
    assert route.shadow is not None and route.shadow.percent == 10


def test_an_elevenlabs_provider_defaults_to_elevenlabs_itself(tmp_path: Path) -> None:
    text = """
providers:
  eleven:
    kind: elevenlabs
    api_key: xi-secret
    models: {tts-1: eleven_flash_v2_5}
    voices: {alloy: 21m00Tcm4TlvDq8ikWAM}
routes:
  tts-1: {providers: {eleven: 100}}
"""
    config = load_routes(write(tmp_path, "routes.yaml", text))
    eleven = config.providers["eleven"]
    assert isinstance(eleven, ElevenLabsProviderConfig)
    assert eleven.base_url == "https://api.elevenlabs.io"
    assert eleven.models == {"tts-1": "eleven_flash_v2_5"} and eleven.timeout == 30.0
    assert "xi-secret" not in repr(config)


def test_the_api_key_never_shows_in_reprs(tmp_path: Path) -> None:
    config = load_routes(write(tmp_path, "routes.yaml", YAML))
    assert "sk-secret" not in repr(config) and "sk-secret" not in str(config.model_dump())


def test_toml(tmp_path: Path) -> None:
    config = load_routes(write(tmp_path, "routes.toml", TOML))
    assert config.routes["tts-1"].providers == {"local": 50, "upstream": 50}


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (YAML.replace("fallback: [local]", "fallback: [nobody]"), "unknown providers"),
        (YAML.replace("local: 95", "local: -5"), "negative"),
        (YAML.replace("kind: remote", "kind: carrier-pigeon"), "kind"),
        (YAML.replace("http://127.0.0.1:9/v1", "ftp://x"), "base_url"),
        (YAML.replace("percent: 10", "percent: 110"), "percent"),
        (YAML.replace("error_rate: 0.05", "error_rte: 0.05"), "error_rte"),
        ("providers: [", "not valid"),
    ],
)
def test_invalid_files_are_refused_with_the_reason(
    tmp_path: Path, text: str, complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        load_routes(write(tmp_path, "routes.yaml", text))
