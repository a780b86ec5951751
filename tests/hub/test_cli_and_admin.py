"""`speechgate voices search|pull`, `serve --pull`'s pull, and the admin routes, against a fake
hub on loopback."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from speechgate.cli import app
from speechgate.voices.installed import find
from tests.helpers.hub import FakeHub, fake_hub, publish_piper_voices
from tests.helpers.server import running_server
from tests.helpers.settings import fake_settings

KEYS = ["en_US-lessac-medium", "de_DE-thorsten-medium"]
# Nothing here loads a pulled voice: a few MB of random bytes stand in for its 63 MB model.
MODEL = random.Random(0).randbytes(2 * 1024 * 1024)
ADMIN_KEY = "sk-admin-test-key-0123456789abcdefghijkl"


@pytest.fixture(scope="module")
def hub() -> Iterator[FakeHub]:
    with fake_hub() as running:
        publish_piper_voices(running, KEYS, model=MODEL)
        yield running


def _env(hub: FakeHub, data_dir: Path) -> dict[str, str]:
    return {"SPEECHGATE_HUB__ENDPOINT": hub.url, "SPEECHGATE_DATA_DIR": str(data_dir)}


def test_cli_searches_by_language_and_pulls(hub: FakeHub, tmp_path: Path) -> None:
    runner = CliRunner()
    env = _env(hub, tmp_path)

    found = runner.invoke(
        app, ["voices", "search", "--language", "de", "--engine", "piper"], env=env
    )
    assert found.exit_code == 0, found.output
    assert "piper:de_DE-thorsten-medium" in found.output
    assert "en_US-lessac-medium" not in found.output

    pulled = runner.invoke(app, ["voices", "pull", "piper:de_DE-thorsten-medium"], env=env)
    assert pulled.exit_code == 0, pulled.output
    assert "installed piper:de_DE-thorsten-medium" in pulled.output
    assert find(tmp_path / "models", "piper", "de_DE-thorsten-medium") is not None

    again = runner.invoke(app, ["voices", "search", "--engine", "piper"], env=env)
    line = next(x for x in again.output.splitlines() if "de_DE-thorsten-medium" in x)
    assert "yes" in line


def test_cli_pull_refuses_an_unknown_reference(hub: FakeHub, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["voices", "pull", "piper:xx_XX-nobody-low"], env=_env(hub, tmp_path)
    )
    assert result.exit_code == 1
    assert "voices search" in " ".join(result.output.split())
    assert not (tmp_path / "models").exists()


@pytest.fixture(scope="module")
def server(hub: FakeHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # The fake engine: pulling installs files; no engine speaks them here.
    settings = fake_settings(
        auth={"admin_key": ADMIN_KEY},
        hub={"endpoint": hub.url},
        data_dir=tmp_path_factory.mktemp("data"),
    )
    with running_server(settings) as running:
        yield running.url


def _admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


def test_admin_pull_streams_progress_then_installed(server: str, hub: FakeHub) -> None:
    with httpx.stream(
        "POST",
        f"{server}/v1/admin/voices/pull",
        headers=_admin(),
        json={"ref": "piper:en_US-lessac-medium"},
        timeout=120,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        events = [json.loads(line) for line in response.iter_lines() if line]
    progress = [e for e in events if e["type"] == "progress"]
    assert progress and all(e["done"] <= e["total"] for e in progress)
    assert events[-1] == {
        "type": "installed",
        "ref": "piper:en_US-lessac-medium",
        "voices": ["en_US-lessac-medium"],
    }
    found = httpx.get(
        f"{server}/v1/admin/voices/search", params={"language": "en"}, headers=_admin()
    ).json()
    assert [(d["ref"], d["installed"]) for d in found["data"] if d["engine"] == "piper"] == [
        ("piper:en_US-lessac-medium", True)
    ]


def test_admin_pull_needs_the_admin_key_and_a_known_ref(server: str) -> None:
    url = f"{server}/v1/admin/voices/pull"
    body = {"ref": "piper:de_DE-thorsten-medium"}
    assert httpx.post(url, json=body).status_code == 401
    assert httpx.post(url, json=body, headers={"Authorization": "Bearer nope"}).status_code == 403
    unknown = httpx.post(url, json={"ref": "piper:xx_XX-nobody-low"}, headers=_admin())
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_pullable"
    malformed = httpx.post(url, json={"ref": "espeak:x"}, headers=_admin())
    assert malformed.status_code == 400
    assert malformed.json()["error"]["param"] == "ref"


def test_admin_pull_reports_a_checksum_failure_in_the_stream(server: str, hub: FakeHub) -> None:
    # The config: the model's bytes are those of the voice pulled before, already cached.
    path = "de/de_DE/thorsten/medium/de_DE-thorsten-medium.onnx.json"
    hub.corrupt.add(("rhasspy/piper-voices", path))
    try:
        response = httpx.post(
            f"{server}/v1/admin/voices/pull",
            headers=_admin(),
            json={"ref": "piper:de_DE-thorsten-medium"},
            timeout=120,
        )
    finally:
        hub.corrupt.clear()
    last = json.loads(response.text.strip().splitlines()[-1])
    assert last["type"] == "error"
    assert last["error"]["code"] == "checksum_mismatch"


def test_serve_pulls_first_and_stops_on_a_failed_pull(hub: FakeHub, tmp_path: Path) -> None:
    # A pull that fails ends `serve` before any server starts (the test would hang otherwise).
    result = CliRunner().invoke(
        app,
        ["serve", "--pull", "piper:en_US-lessac-medium", "--pull", "piper:xx_XX-nobody-low"],
        env=_env(hub, tmp_path),
    )
    assert result.exit_code == 1
    assert "installed piper:en_US-lessac-medium" in result.output
    assert "xx_XX-nobody-low" in result.output
