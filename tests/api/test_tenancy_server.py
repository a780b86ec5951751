"""Keys, limits, metering and reports through a real server, driven by the openai SDK, on
SQLite and on a real PostgreSQL."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import openai
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from speechgate.metering.store import Store
from tests.helpers.audio import decode_audio
from tests.helpers.postgres import fresh_database
from tests.helpers.server import RunningServer, running_server, sdk_client
from tests.helpers.settings import fake_settings
from tests.helpers.tenancy import (
    ADMIN_KEY,
    LONG,
    SHORT,
    admin,
    held,
    new_key,
    speak,
    tenancy,
    usage,
)
from tests.helpers.waiting import wait_for

# Real servers and their processes are the subject: CI runs this module, the inner loop
# (`make test-fast`) does not.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def keyed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('store') / 'store.db'}"
    else:
        url = fresh_database(request.getfixturevalue("postgres_server"))
    settings = fake_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": url},
    )
    with running_server(settings) as server:
        yield server


def test_a_key_is_needed_and_works(keyed: RunningServer) -> None:
    for bad in ["unused", "sk-sg-" + "A" * 43]:
        with sdk_client(keyed, bad) as client, pytest.raises(openai.AuthenticationError) as raised:
            speak(client)
        assert raised.value.status_code == 401
        assert raised.value.code == "invalid_api_key"
        assert bad not in raised.value.response.text
    for response in (
        httpx.get(f"{keyed.url}/v1/models", timeout=10),
        httpx.get(f"{keyed.url}/v1/usage", timeout=10),
        httpx.post(f"{keyed.url}/v1/chat/completions", json={}, timeout=10),
    ):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_api_key"

    _, secret = new_key(keyed)
    with sdk_client(keyed, secret) as client:
        audio = decode_audio(speak(client), "wav")
        assert audio.duration > 0.5 and audio.rms > 0.01
        assert any(model.id == "fake" for model in client.models.list())


def test_revoked_keys_and_disallowed_models(keyed: RunningServer) -> None:
    key_id, secret = new_key(keyed, models=["fake"])
    with sdk_client(keyed, secret) as client:
        speak(client)
        with pytest.raises(openai.PermissionDeniedError) as raised:
            speak(client, model="tts-1")
        assert raised.value.code == "model_not_allowed"
        with admin(keyed) as admin_client:
            assert admin_client.post(f"/admin/keys/{key_id}/revoke").status_code == 200
        with pytest.raises(openai.AuthenticationError):
            speak(client)


def test_admin_endpoints_refuse_normal_keys(keyed: RunningServer) -> None:
    key_id, secret = new_key(keyed)
    for headers, status in [
        ({}, 401),
        ({"Authorization": "Bearer " + ADMIN_KEY + "x"}, 403),
        ({"Authorization": f"Bearer {secret}"}, 403),
    ]:
        for method, path in [("GET", "/keys"), ("POST", "/keys"), ("PATCH", f"/keys/{key_id}")]:
            response = httpx.request(
                method, f"{keyed.url}/v1/admin{path}", headers=headers, json={"name": "x"}
            )
            assert response.status_code == status, (method, path, response.text)
            assert response.json()["error"]["type"] in ("invalid_request_error", "permission_error")
    # Only the admin can see usage by key.
    response = httpx.get(
        f"{keyed.url}/v1/usage?group_by=key", headers={"Authorization": f"Bearer {secret}"}
    )
    assert response.status_code == 403
    with admin(keyed) as client:
        listed = client.get("/admin/keys").json()["data"]
        assert key_id in [key["id"] for key in listed]
        assert all("key" not in key for key in listed)
        changed = client.patch(f"/admin/keys/{key_id}", json={"max_concurrent": 3}).json()
        assert changed["max_concurrent"] == 3
        assert client.patch(f"/admin/keys/{key_id}", json={"burst": 3}).status_code == 400
        assert client.get("/admin/keys/key_missing").status_code == 404


def test_rate_limit_with_burst_and_refill(
    keyed: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    seconds = [0.0]
    monkeypatch.setattr(tenancy(keyed), "clock", lambda: seconds[0])
    _, secret = new_key(keyed, requests_per_second=0.5, burst=2)
    with sdk_client(keyed, secret) as client:
        for remaining in ("1", "0"):
            response = client.audio.speech.with_raw_response.create(
                model="fake", voice="alloy", input=SHORT, response_format="wav"
            )
            assert response.headers["x-ratelimit-limit-requests"] == "2"
            assert response.headers["x-ratelimit-remaining-requests"] == remaining
        with pytest.raises(openai.RateLimitError) as raised:
            speak(client)
        headers = raised.value.response.headers
        assert raised.value.code == "rate_limit_exceeded"
        assert headers["retry-after"] == "2"
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert headers["x-ratelimit-reset-requests"] == "4s"
        seconds[0] += 1.9
        with pytest.raises(openai.RateLimitError):
            speak(client)
        seconds[0] += 0.1
        speak(client)


def test_concurrency_cap(keyed: RunningServer) -> None:
    key_id, secret = new_key(keyed, max_concurrent=1)
    with sdk_client(keyed, secret) as client:
        with held(client):
            with pytest.raises(openai.RateLimitError) as raised:
                speak(client)
            assert raised.value.code == "concurrency_limit_exceeded"
            assert raised.value.response.headers["retry-after"] == "1"
        wait_for(lambda: tenancy(keyed).in_flight(key_id) == 0)
        speak(client)


def test_a_slot_is_free_before_the_answer_ends(keyed: RunningServer) -> None:
    # A client that sends its next request as the last answer arrives is never refused.
    key_id, secret = new_key(keyed, max_concurrent=1)
    with sdk_client(keyed, secret) as client:
        for response_format in ("wav", "mp3", "pcm"):
            client.audio.speech.create(
                model="fake", voice="alloy", input=SHORT, response_format=response_format
            )
            assert tenancy(keyed).in_flight(key_id) == 0
        with client.audio.speech.with_streaming_response.create(
            model="fake", voice="alloy", input=SHORT, stream_format="sse"
        ) as streamed:
            assert b"speech.audio.done" in streamed.read()
        assert tenancy(keyed).in_flight(key_id) == 0


def test_quota_exhaustion(keyed: RunningServer) -> None:
    _, secret = new_key(keyed, monthly_characters=2 * len(SHORT) + 1)
    with sdk_client(keyed, secret) as client:
        for remaining in (len(SHORT) + 1, 1):
            response = client.audio.speech.with_raw_response.create(
                model="fake", voice="alloy", input=SHORT, response_format="wav"
            )
            assert response.headers["x-ratelimit-remaining-characters"] == str(remaining)
        with pytest.raises(openai.RateLimitError) as raised:
            speak(client)
        assert raised.value.code == "insufficient_quota"
        assert raised.value.type == "insufficient_quota"
        assert raised.value.response.headers["x-ratelimit-remaining-characters"] == "1"
        speak(client, text="A")  # what is left still works


@dataclass
class Made:
    requests: int = 0
    errors: int = 0
    aborted: int = 0
    characters: int = 0
    audio_seconds: float = 0.0


def test_usage_totals_equal_the_requests_made(keyed: RunningServer) -> None:
    key_id, secret = new_key(keyed, models=["fake"], max_concurrent=1)
    made = Made()
    with sdk_client(keyed, secret) as client:
        for text in (SHORT, "Another short one, a little longer."):
            audio = decode_audio(speak(client, text), "wav")
            made.requests += 1
            made.characters += len(text)
            made.audio_seconds += audio.duration
        for bad in (
            lambda: speak(client, model="tts-1"),  # 403
            lambda: client.audio.speech.create(model="fake", voice="nobody", input=SHORT),
        ):
            with pytest.raises(openai.APIStatusError):
                bad()
            made.requests += 1
            made.errors += 1
        with held(client), pytest.raises(openai.RateLimitError):
            speak(client)  # over the concurrency cap
        made.requests += 2
        made.errors += 1
        made.aborted += 1
        made.characters += len(LONG)

    def line() -> dict[str, Any]:
        return usage(keyed, secret)["total"]

    wait_for(lambda: line()["requests"] == made.requests)
    total = line()
    assert (total["requests"], total["errors"], total["aborted"]) == (
        made.requests,
        made.errors,
        made.aborted,
    )
    assert total["characters"] == made.characters
    # What was delivered: both whole clips, and some (not all) of the abandoned one.
    assert made.audio_seconds < total["audio_seconds"] < made.audio_seconds + 300
    by_key = usage(keyed, ADMIN_KEY, group_by="key")
    mine = [line for line in by_key["lines"] if line["key_id"] == key_id]
    assert sum(line["requests"] for line in mine) == made.requests
    assert by_key["total"]["requests"] >= made.requests
    assert total["reference_costs_usd"]["OpenAI tts-1"] == pytest.approx(made.characters * 15 / 1e6)


def test_the_websocket_needs_a_key(keyed: RunningServer) -> None:
    url = keyed.url.replace("http", "ws") + "/v1/audio/speech/stream"
    with pytest.raises(InvalidStatus) as raised, connect(url):
        pass
    assert raised.value.response.status_code == 403
    _, secret = new_key(keyed)
    with connect(url, additional_headers={"Authorization": f"Bearer {secret}"}) as ws:
        ws.send('{"type": "session.update", "session": {"model": "fake", "voice": "alloy"}}')
        assert '"session.created"' in str(ws.recv(timeout=30))


def session(server: RunningServer, key: str, *messages: str) -> list[str | bytes]:
    """Open a speech session with `key`, send `messages`, and read until the server closes (a
    refusal may close it before every message is sent: what came before the close is read)."""
    url = server.url.replace("http", "ws") + "/v1/audio/speech/stream"
    received: list[str | bytes] = []
    update = {"model": "fake", "voice": "alloy", "response_format": "pcm"}
    with connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as ws:
        with contextlib.suppress(ConnectionClosed):
            ws.send(json.dumps({"type": "session.update", "session": update}))
            for message in messages:
                ws.send(message)
        with contextlib.suppress(ConnectionClosed):
            while True:
                received.append(ws.recv(timeout=30))
    return received


def test_a_session_is_metered_and_held_to_the_quota(keyed: RunningServer) -> None:
    first, second = "One sentence here.", "And a second one."
    # A session counts the characters it speaks: its segments, without the space between.
    spoken_text = len(first) + len(second)
    _, secret = new_key(keyed, monthly_characters=spoken_text + 5)
    done = session(
        keyed,
        secret,
        json.dumps({"type": "input_text.delta", "delta": f"{first} {second}"}),
        '{"type": "input_text.done"}',
    )
    assert json.loads(done[-1])["type"] == "session.done"
    wait_for(lambda: usage(keyed, secret)["total"]["requests"] == 1)
    total = usage(keyed, secret)["total"]
    assert (total["characters"], total["errors"]) == (spoken_text, 0)
    spoken = sum(len(part) for part in done if isinstance(part, bytes)) / 2 / 24000
    assert total["audio_seconds"] == pytest.approx(spoken, abs=0.01)

    # 5 characters left: the session opens, and its first sentence is refused.
    refused = session(
        keyed,
        secret,
        json.dumps({"type": "input_text.delta", "delta": first}),
        '{"type": "input_text.done"}',
    )
    events = [json.loads(part) for part in refused if isinstance(part, str)]
    assert events[-1]["type"] == "error"
    assert events[-1]["error"]["code"] == "insufficient_quota"
    assert not any(isinstance(part, bytes) for part in refused)
    wait_for(lambda: usage(keyed, secret)["total"]["requests"] == 2)
    assert usage(keyed, secret)["total"]["characters"] == spoken_text


def test_a_session_counts_against_the_rate_limit(keyed: RunningServer) -> None:
    _, secret = new_key(keyed, requests_per_second=0.001, burst=1)
    assert json.loads(session(keyed, secret, '{"type": "input_text.done"}')[-1])["type"] == (
        "session.done"
    )
    error = json.loads(session(keyed, secret)[-1])
    assert (error["type"], error["error"]["code"]) == ("error", "rate_limit_exceeded")


def test_no_key_reaches_the_logs(keyed: RunningServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key_id, secret = new_key(keyed, models=["fake"])
    with sdk_client(keyed, secret) as client:
        speak(client)
        with pytest.raises(openai.PermissionDeniedError):
            speak(client, model="tts-1")
    wrong = secret[:-4] + "abcd"
    with sdk_client(keyed, wrong) as client, pytest.raises(openai.AuthenticationError):
        speak(client)
    usage(keyed, secret)
    with admin(keyed) as client:
        client.post(f"/admin/keys/{key_id}/revoke")
    assert caplog.records, "nothing was logged: the test would prove nothing"
    logged = caplog.text + " ".join(str(r.args) for r in caplog.records)
    for leaked in (secret, wrong, ADMIN_KEY, secret[len("sk-sg-") :]):
        assert leaked not in logged


def test_graceful_shutdown_writes_the_last_records(store_url: str) -> None:
    settings = fake_settings(
        store={"database_url": store_url},
        usage={"flush_interval": 3600},  # only the shutdown writes
    )
    with running_server(settings) as server, sdk_client(server, "unused") as client:
        for text in ("One.", "Two.", "Three."):
            speak(client, text)
        assert tenancy(server).recorder is not None
    store = Store(store_url)
    [line] = store.usage_totals(datetime(2000, 1, 1), datetime(3000, 1, 1))
    assert (line.key_id, line.model, line.provider, line.requests) == (None, "fake", "local", 3)
    assert line.characters == len("One.Two.Three.")
    store.close()
