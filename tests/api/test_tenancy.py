"""What status a speech request's usage record gets, for every way a request can end."""

from __future__ import annotations

import pytest

from speechgate.api.tenancy import recorded_status
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
