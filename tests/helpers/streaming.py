"""Streamed speech: how first audio is checked against the work still to do, and the streaming
endpoint (`/v1/audio/speech/stream`) over a real websocket."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from websockets.sync.client import ClientConnection, connect

from tests.helpers.server import RunningServer


def read_streamed(
    chunks: Iterable[bytes], speaking: Callable[[], bool]
) -> tuple[list[bytes], bool]:
    """Every part of a streamed answer, and whether `speaking()` (its job still running) held
    when the first part arrived: an order a loaded machine cannot reverse, where it can stretch
    any wall-clock fraction."""
    parts: list[bytes] = []
    speaking_at_first = False
    for part in chunks:
        if not parts:
            speaking_at_first = speaking()
        parts.append(part)
    return parts, speaking_at_first


def session_events(ws: ClientConnection) -> tuple[list[dict[str, Any]], bytes]:
    """The session's events up to its end (done or error), and the audio sent meanwhile."""
    events: list[dict[str, Any]] = []
    audio = bytearray()
    while True:
        message = ws.recv(timeout=120)
        if isinstance(message, bytes):
            audio += message
            continue
        event = json.loads(message)
        events.append(event)
        if event["type"] in ("session.done", "error"):
            return events, bytes(audio)


@contextmanager
def speech_session(server: RunningServer, **session: Any) -> Iterator[ClientConnection]:
    """A session opened with `session` (espeak, alloy, wav unless it says otherwise)."""
    options = {"model": "espeak", "voice": "alloy", "response_format": "wav", **session}
    with connect(server.url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
        ws.send(json.dumps({"type": "session.update", "session": options}))
        created = json.loads(ws.recv(timeout=30))
        assert created["type"] == "session.created"
        yield ws
