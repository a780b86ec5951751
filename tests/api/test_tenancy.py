"""What status a speech request's usage record gets, for every way a request can end; which
requests are metered; where the key is read from."""

from __future__ import annotations

import pytest
from starlette.requests import HTTPConnection

from speechgate.api.access import credentials, is_metered, recorded_status
from speechgate.metering.meter import Meter
from speechgate.metering.records import CLIENT_CLOSED


class Stream:
    def __init__(self, completed: bool) -> None:
        self.completed = completed


@pytest.mark.parametrize(
    ("stream", "status", "failed", "client_left", "recorded"),
    [
        (Stream(completed=True), 200, False, False, 200),
        # The client read everything, then closed: still a success.
        (Stream(completed=True), 200, False, True, 200),
        (None, 400, False, False, 400),
        (None, 429, False, False, 429),
        (None, 503, False, False, 503),
        # Left while waiting for first audio (the route answers 499 itself).
        (None, CLIENT_CLOSED, False, True, CLIENT_CLOSED),
        # Left mid-stream.
        (Stream(completed=False), 200, False, True, CLIENT_CLOSED),
        # Synthesis failed mid-stream: an exception, or an error event in SSE.
        (Stream(completed=False), 200, True, False, 500),
        (Stream(completed=False), 200, False, False, 500),
        # Nothing was ever answered.
        (None, None, True, False, 500),
        (None, None, False, True, CLIENT_CLOSED),
    ],
)
def test_recorded_status(
    stream: Stream | None, status: int | None, failed: bool, client_left: bool, recorded: int
) -> None:
    meter = Meter("req_1", 0.0, stream=stream)  # type: ignore[arg-type]
    assert recorded_status(meter, status, failed, client_left) == recorded


def connection(**headers: str) -> HTTPConnection:
    raw = [(name.encode(), value.encode()) for name, value in headers.items()]
    return HTTPConnection({"type": "http", "headers": raw})


@pytest.mark.parametrize(
    ("headers", "found"),
    [
        ({"xi-api-key": "sk-1"}, "Bearer sk-1"),  # ElevenLabs' clients send the key there
        ({"authorization": "Bearer sk-2"}, "Bearer sk-2"),
        # Both: the standard header wins, so one request is never two keys' at once.
        ({"authorization": "Bearer sk-2", "xi-api-key": "sk-1"}, "Bearer sk-2"),
        ({"xi-api-key": ""}, None),
        ({}, None),
    ],
)
def test_credentials_take_elevenlabs_key_header_too(
    headers: dict[str, str], found: str | None
) -> None:
    assert credentials(connection(**headers)) == found


@pytest.mark.parametrize(
    ("method", "path", "metered"),
    [
        ("POST", "/v1/audio/speech", True),
        ("POST", "/v1/text-to-speech/alloy", True),
        ("POST", "/v1/text-to-speech/alloy/stream", True),
        ("GET", "/v1/voices", False),
        ("GET", "/v1/text-to-speech/alloy", False),
    ],
)
def test_elevenlabs_speech_is_metered(method: str, path: str, metered: bool) -> None:
    assert is_metered(method, path) is metered
