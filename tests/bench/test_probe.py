"""The minimal HTTP/1.1 client of the overhead measurement, against a real server."""

from __future__ import annotations

import pytest

from speechgate.bench.audio import WAV_HEADER_BYTES, wav_audio_seconds
from speechgate.bench.overhead import engine_timing
from speechgate.bench.probe import Probe
from tests.helpers.server import RunningServer

SPEECH = {"model": "espeak", "voice": "alloy", "input": "Hello there.", "response_format": "wav"}


def test_streamed_audio_and_an_error_on_one_kept_alive_connection(
    server: RunningServer,
) -> None:
    with Probe(server.url) as probe:
        first = probe.post_json("/v1/audio/speech", SPEECH, skip=WAV_HEADER_BYTES)
        refused = probe.post_json("/v1/audio/speech", {**SPEECH, "speed": 9})
        second = probe.post_json("/v1/audio/speech", SPEECH, skip=WAV_HEADER_BYTES)

    for response in (first, second):
        assert response.status == 200
        assert response.headers["transfer-encoding"] == "chunked"
        assert wav_audio_seconds(response.body) > 0.3
        assert response.first_byte_after is not None and response.first_byte_after > 0
        assert engine_timing(response.headers["server-timing"]) is not None
    # A sized JSON body between the two streams, read whole: the next response parses.
    assert refused.status == 400
    assert b'"param":"speed"' in refused.body.replace(b" ", b"")


def test_only_plain_http() -> None:
    with pytest.raises(ValueError, match="plain http"):
        Probe("https://example.com")


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("ttfa;dur=12.5, engine;dur=10.25", 0.01025),
        ('engine;desc="the engine";dur=3', 0.003),
        ("ttfa;dur=12.5", None),
        (None, None),
    ],
)
def test_engine_timing(header: str | None, seconds: float | None) -> None:
    assert engine_timing(header) == (pytest.approx(seconds) if seconds is not None else None)
