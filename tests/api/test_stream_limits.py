"""An open streaming session (`WS /v1/audio/speech/stream`) is held to its key while it runs:
revoked, expired or denied its model, the key closes the session at the next check; no
session outlives `max_session_seconds`; and a session sends no more than
`session_max_lead_seconds` of audio ahead of real time, so that little is left in flight when
it is closed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed

from speechgate.api.stream import SendPacer
from tests.helpers.clock import Clock, run_on, settle
from tests.helpers.inprocess import InProcessApp, InProcessWebSocket, in_process
from tests.helpers.settings import fake_settings
from tests.helpers.tenancy import ADMIN_KEY, admin, new_key, spy_usage, tenancy
from tests.helpers.waiting import wait_for

SENTENCE = "One more sentence to say."
# Far beyond a check's interval: a session that is never closed fails the test, not hangs it.
_WAIT = 20


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    store = tmp_path_factory.mktemp("store") / "store.db"
    settings = fake_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": f"sqlite:///{store}"},
        sessions={"check_interval": 0.05},
    )
    with in_process(settings) as server:
        yield server


@contextmanager
def open_session(server: InProcessApp, secret: str) -> Iterator[InProcessWebSocket]:
    """A session of `secret`'s that has spoken one sentence, and is still open."""
    with server.websocket(
        "/v1/audio/speech/stream", headers={"Authorization": f"Bearer {secret}"}
    ) as ws:
        update = {"model": "fake", "voice": "alloy", "response_format": "pcm"}
        ws.send(json.dumps({"type": "session.update", "session": update}))
        assert json.loads(ws.recv(timeout=_WAIT))["type"] == "session.created"
        speak(ws)
        while (message := ws.recv(timeout=_WAIT)) and (
            isinstance(message, bytes) or json.loads(message)["type"] != "segment.done"
        ):
            pass
        yield ws


def speak(ws: InProcessWebSocket) -> None:
    ws.send(json.dumps({"type": "input_text.delta", "delta": SENTENCE}))
    ws.send(json.dumps({"type": "input_text.flush"}))


def closing(ws: InProcessWebSocket) -> tuple[dict[str, Any], int | None]:
    """Keep the session talking until the server closes it: its error event and close code."""
    error: dict[str, Any] | None = None
    try:
        while True:
            message = ws.recv(timeout=_WAIT)
            if isinstance(message, bytes):
                continue
            event = json.loads(message)
            if event["type"] == "error":
                error = event["error"]
            elif event["type"] == "segment.done":
                speak(ws)
    except ConnectionClosed as closed:
        code = closed.rcvd.code if closed.rcvd is not None else None
    assert error is not None, "closed without an error event"
    return error, code


def test_a_revoked_key_closes_its_open_session(
    keyed: InProcessApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = spy_usage(keyed, monkeypatch, "ws_")
    key_id, secret = new_key(keyed)
    with open_session(keyed, secret) as ws:
        with admin(keyed) as client:
            assert client.post(f"/admin/keys/{key_id}/revoke").status_code == 200
        error, code = closing(ws)
    assert (error["code"], error["type"]) == ("invalid_api_key", "invalid_request_error")
    assert code == 1008
    assert "revoked or has expired" in error["message"]
    wait_for(lambda: len(records) == 1)
    # What it spoke before the revocation stays billed (an error record would refund it).
    assert records[0].key_id == key_id
    assert records[0].billable and records[0].characters >= len(SENTENCE)


def test_an_expired_key_closes_its_open_session(
    keyed: InProcessApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, secret = new_key(keyed, expires_at="2999-01-01T00:00:00Z")
    with open_session(keyed, secret) as ws:
        # The server's clock moves past the key's end while the session runs.
        later = datetime(2999, 1, 1) + timedelta(days=1)
        monkeypatch.setattr(tenancy(keyed), "now", lambda: later)
        error, code = closing(ws)
    assert (error["code"], code) == ("invalid_api_key", 1008)


def test_a_key_denied_the_sessions_model_closes_it(keyed: InProcessApp) -> None:
    key_id, secret = new_key(keyed)
    with open_session(keyed, secret) as ws:
        with admin(keyed) as client:
            changed = client.patch(f"/admin/keys/{key_id}", json={"models": ["espeak"]})
            assert changed.status_code == 200, changed.text
        error, code = closing(ws)
    assert (error["code"], error["param"], code) == ("model_not_allowed", "model", 1008)


def test_a_session_ends_at_its_maximum_length_and_is_billed(
    keyed: InProcessApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = spy_usage(keyed, monkeypatch, "ws_")
    monkeypatch.setattr(keyed.state.settings.sessions, "max_seconds", 0.5)
    _, secret = new_key(keyed)
    with open_session(keyed, secret) as ws:
        error, code = closing(ws)
    assert (error["code"], code) == ("session_expired", 1000)
    assert "maximum length of 0.5 s" in error["message"]
    wait_for(lambda: len(records) == 1)
    assert records[0].status == 200 and records[0].characters >= len(SENTENCE)


def test_the_pacer_lets_a_lead_through_then_holds_to_real_time() -> None:
    clock = Clock()
    waited: list[float] = []

    async def send(pacer: SendPacer, seconds: float) -> None:
        started = clock()
        sending = asyncio.ensure_future(pacer.sent(seconds))
        while not sending.done():
            await settle()
            if not sending.done():
                clock.advance(0.25)
        waited.append(clock() - started)

    async def scenario() -> None:
        pacer = SendPacer(max_lead=3)
        for _ in range(3):
            await send(pacer, 1)  # the lead: sent as fast as it comes
        assert waited == [0, 0, 0]
        await send(pacer, 1)  # beyond it: one second of audio a second
        await send(pacer, 2)
        assert waited[3:] == [1, 2]
        # A pause (the text is late) gives the client time to play what it has; it earns no
        # lead beyond the bound.
        clock.advance(60)
        for _ in range(4):
            await send(pacer, 1)
        assert waited[5:] == [0, 0, 0, 1]

    run_on(clock, scenario)


def test_no_bound_no_wait() -> None:
    async def scenario() -> None:
        pacer = SendPacer(max_lead=None)
        for _ in range(100):
            await pacer.sent(10)

    run_on(Clock(), scenario)
