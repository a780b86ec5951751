"""`GET /v1/status` on a real server: workers, queues, and the requests just made."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.helpers.server import RunningServer

pytestmark = pytest.mark.slow


def status(server: RunningServer) -> dict[str, object]:
    response = httpx.get(f"{server.url}/v1/status", timeout=10)
    assert response.status_code == 200
    body: dict[str, object] = response.json()
    return body


def test_every_engine_and_worker_is_listed(server: RunningServer) -> None:
    body = status(server)
    assert body["object"] == "speechgate.status"
    assert body["ready"] is True
    engines = {engine["name"]: engine for engine in body["engines"]}  # type: ignore[attr-defined]
    assert set(engines) == {"piper", "espeak"}
    for engine in engines.values():
        assert set(engine["workers"]) == {"starting", "idle", "busy", "restarting", "stopped"}
        assert engine["workers"]["idle"] + engine["workers"]["busy"] == 2
        assert engine["queued"] == 0
        assert engine["crash_looping"] is False


def test_a_request_shows_in_the_recent_figures(
    server: RunningServer, client: openai.OpenAI
) -> None:
    audio = client.audio.speech.create(
        model="espeak", voice="alloy", input="Counted.", response_format="wav"
    )
    assert audio.content
    recent = status(server)["recent"]
    assert isinstance(recent, dict)
    newest = recent["buckets"][-1]
    assert newest["requests"] >= 1
    assert newest["audio_seconds"] > 0
    assert newest["time_to_first_audio_ms"]["p50"] > 0
    assert recent["requests"] >= 1
    assert recent["time_to_first_audio_ms"]["p95"] >= recent["time_to_first_audio_ms"]["p50"]
    engines = {engine["name"]: engine for engine in status(server)["engines"]}  # type: ignore[attr-defined]
    assert engines["espeak"]["real_time_factor"] > 0
