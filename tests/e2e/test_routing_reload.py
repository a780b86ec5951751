"""`speechgate serve` as users run it: the routes file is re-read on SIGHUP without dropping
a request under way, and `speechgate routing` changes the routes of the running server."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from speechgate.cli import app
from tests.helpers.audio import decode_audio
from tests.helpers.server import SPEECHGATE, free_port, serve_process
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.slow

ADMIN_KEY = "admin-key-of-at-least-32-characters"
# Minutes of speech: a request still under way when the routes are reloaded.
LONG = " ".join(["Section one explains the budget and the schedule in plain words."] * 60)
# The server is its own upstream: "relay" goes out over HTTP and back in.
ROUTES = """
providers:
  local: {{kind: local, model: espeak}}
  self: {{kind: remote, base_url: "http://127.0.0.1:{port}/v1", model: espeak, timeout: {timeout}}}
routes:
  relay: {{providers: {{self: 100}}}}
  canary: {{providers: {{local: {local}, self: {canary}}}}}
"""


def routes(path: Path, port: int, timeout: int, local: int, canary: int) -> None:
    path.write_text(
        ROUTES.format(port=port, timeout=timeout, local=local, canary=canary), encoding="utf-8"
    )


def cli(*args: str, url: str) -> dict[str, object]:
    """In this process (typer's runner): a process of its own would import speechgate anew on
    every call, polls included; the last test runs the entry point as users do."""
    result = CliRunner().invoke(app, ["routing", *args, "--url", url, "--admin-key", ADMIN_KEY])
    assert result.exit_code == 0, result.output
    answer: dict[str, object] = json.loads(result.stdout)
    return answer


def weights(url: str) -> object:
    return cli("show", url=url)["routes"]["canary"]["weights"]  # type: ignore[index]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    port = free_port()
    path = tmp_path / "routes.yaml"
    routes(path, port, timeout=30, local=100, canary=0)
    env = {
        "SPEECHGATE_ROUTING__ROUTES_FILE": str(path),
        "SPEECHGATE_AUTH__ADMIN_KEY": ADMIN_KEY,
        "SPEECHGATE_DATA_DIR": str(tmp_path / "data"),
    }
    with serve_process("--engine", "espeak", "--workers", "1", env=env, port=port) as (url, server):
        yield url, path, server


def test_sighup_and_the_cli_change_the_routes_of_the_running_server(
    served: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    """One server for both ways of changing its routes (a server is seconds of start-up):
    SIGHUP first, then the CLI, then its log once it has stopped."""
    url, path, server = served
    port = int(url.rsplit(":", 1)[1])
    body = {"model": "relay", "voice": "en-us", "input": LONG, "response_format": "pcm"}
    with (
        httpx.Client(timeout=60) as client,
        client.stream("POST", f"{url}/v1/audio/speech", json=body) as response,
    ):
        assert response.headers["x-speechgate-provider"] == "self"
        chunks = response.iter_bytes()
        first = next(chunks)
        # A changed provider (its timeout) is replaced; the request under way keeps the old one.
        routes(path, port, timeout=31, local=20, canary=80)
        server.send_signal(signal.SIGHUP)
        wait_for(lambda: weights(url) == {"local": 20, "self": 80})
        audio = decode_audio(first + b"".join(chunks), "pcm")
    assert audio.duration > 60 and audio.rms > 0.01

    # An invalid file is refused; the routes in force stay.
    path.write_text("routes: [", encoding="utf-8")
    server.send_signal(signal.SIGHUP)
    assert weights(url) == {"local": 20, "self": 80}

    # The CLI, on the routes of a valid file again.
    routes(path, port, timeout=30, local=100, canary=0)
    assert cli("weights", "canary", "local=75", "self=25", url=url)["routes"]["canary"][  # type: ignore[index]
        "weights"
    ] == {"local": 75, "self": 25}
    cli("promote", "canary", "self", url=url)
    assert weights(url) == {"local": 0, "self": 100}
    speech = {"model": "canary", "voice": "en-us", "input": "Hello.", "response_format": "wav"}
    assert (
        httpx.post(f"{url}/v1/audio/speech", json=speech).headers["x-speechgate-provider"] == "self"
    )
    state = cli("disable", "self", url=url)
    assert state["providers"]["self"]["enabled"] is False  # type: ignore[index]
    assert (
        httpx.post(f"{url}/v1/audio/speech", json=speech).headers["x-speechgate-provider"]
        == "local"
    )
    cli("reload", url=url)
    assert weights(url) == {"local": 100, "self": 0}
    # As users run it, a process of its own: the entry point and its exit status.
    failed = subprocess.run(
        [*SPEECHGATE, "routing", "show", "--url", url, "--admin-key", "wrong"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert failed.returncode == 1 and "403" in failed.stdout

    server.terminate()
    assert "routes not reloaded" in server.communicate(timeout=30)[0]
