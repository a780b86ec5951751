"""Word timestamps in the SSE stream of `POST /v1/audio/speech` (`timestamp_granularities`)."""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from tests.helpers.audio import decode_audio
from tests.helpers.inprocess import InProcessApp
from tests.helpers.server import RunningServer

# Several segments (so several word events between deltas), spaces and a newline the engine
# never sees, punctuation at the words' edges and a non-ASCII letter: offsets must still be
# into this text as sent.
TEXT = (
    "Hello,  wörld!\nThis is (quite) a test of words. Numbers: 42 and 7 follow here; "
    '"quoted" ones too. The end.'
)
WORDS = re.findall(r"\w+", TEXT)
PCM_RATE = 24000  # `pcm` is 16-bit mono at OpenAI's rate


def events(server: InProcessApp | RunningServer, **fields: object) -> list[dict[str, Any]]:
    body = {
        "model": "fake",
        "voice": "alloy",
        "input": TEXT,
        "response_format": "pcm",
        "stream_format": "sse",
        **fields,
    }
    if isinstance(server, InProcessApp):
        response = server.http.post("/v1/audio/speech", json=body)
    else:
        response = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return [json.loads(line[6:]) for line in response.text.splitlines() if line[:6] == "data: "]


def words_of(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        word for event in stream if event["type"] == "speech.audio.words" for word in event["words"]
    ]


def audio_of(stream: list[dict[str, Any]]) -> bytes:
    return b"".join(
        base64.b64decode(event["audio"])
        for event in stream
        if event["type"] == "speech.audio.delta"
    )


def test_words_come_before_their_audio_and_slice_the_input(fake_app: InProcessApp) -> None:
    stream = events(fake_app, timestamp_granularities=["word"])
    assert stream[-1]["type"] == "speech.audio.done"
    assert sum(event["type"] == "speech.audio.words" for event in stream) > 1

    # Each word event's words are still to be heard: no audio sent so far reaches them.
    sent = 0.0
    for event in stream:
        if event["type"] == "speech.audio.delta":
            sent += len(base64.b64decode(event["audio"])) / 2 / PCM_RATE
        elif event["type"] == "speech.audio.words":
            assert all(word["start"] >= sent - 0.001 for word in event["words"]), (sent, event)

    words = words_of(stream)
    assert [word["word"] for word in words] == WORDS
    assert [TEXT[word["start_char"] : word["end_char"]] for word in words] == WORDS
    starts = [word["start"] for word in words]
    assert starts == sorted(starts)
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(words))
    duration = decode_audio(audio_of(stream), "pcm").duration
    assert all(0 <= word["start"] <= word["end"] <= duration + 0.001 for word in words)
    # Pauses between sentences are in the times: the last word ends near the audio's end.
    assert words[-1]["end"] == pytest.approx(duration, abs=0.1)


def test_without_asking_the_stream_has_only_openai_events(fake_app: InProcessApp) -> None:
    kinds = {event["type"] for event in events(fake_app)}
    assert kinds == {"speech.audio.delta", "speech.audio.done"}


def test_word_timestamps_need_sse(fake_app: InProcessApp) -> None:
    body = {
        "model": "fake",
        "voice": "alloy",
        "input": TEXT,
        "timestamp_granularities": ["word"],
    }
    response = fake_app.http.post("/v1/audio/speech", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "timestamp_granularities"


@pytest.fixture
def sdk(fake_app: InProcessApp) -> Iterator[openai.OpenAI]:
    with fake_app.sdk() as client:
        yield client


def test_the_openai_sdk_reads_a_stream_with_word_events(sdk: openai.OpenAI) -> None:
    """Through the SDK's speech call (as its users read SSE: line by line) and through its own
    SSE decoder (`openai.Stream`, which every streamed SDK call parses with): the extra event
    type breaks neither, and the audio is the same."""
    with sdk.audio.speech.with_streaming_response.create(
        model="fake",
        voice="alloy",
        input=TEXT,
        response_format="pcm",
        stream_format="sse",
        extra_body={"timestamp_granularities": ["word"]},
    ) as response:
        lines = [json.loads(line[6:]) for line in response.iter_lines() if line[:6] == "data: "]
    parsed = sdk.post(
        "/audio/speech",
        body={
            "model": "fake",
            "voice": "alloy",
            "input": TEXT,
            "response_format": "pcm",
            "stream_format": "sse",
            "timestamp_granularities": ["word"],
        },
        cast_to=object,
        stream=True,
        stream_cls=openai.Stream[object],
    )
    decoded: list[dict[str, Any]] = list(parsed)  # type: ignore[arg-type]
    for stream in (lines, decoded):
        assert {event["type"] for event in stream} == {
            "speech.audio.words",
            "speech.audio.delta",
            "speech.audio.done",
        }
        assert [word["word"] for word in words_of(stream)] == WORDS
    assert audio_of(lines) == audio_of(decoded)
    assert decode_audio(audio_of(decoded), "pcm").rms > 0.01


SPOKEN = "Hello there, my friend. This is a test of word times! Does it work? It does."


@pytest.mark.slow
def test_espeak_word_times_lie_on_its_speech(server: RunningServer) -> None:
    """A real engine: each word's span is speech, and the same text streamed as AAC has the same
    times (its priming frame is not sent)."""
    pcm = events(server, model="espeak", input=SPOKEN, timestamp_granularities=["word"])
    audio = decode_audio(audio_of(pcm), "pcm")
    words = words_of(pcm)
    assert [word["word"] for word in words] == re.findall(r"\w+", SPOKEN)
    for word in words:
        span = audio.samples[round(word["start"] * PCM_RATE) : round(word["end"] * PCM_RATE)]
        assert len(span) > 0.05 * PCM_RATE
        assert np.sqrt(np.mean(np.square(span))) > 0.02, word
    # Between sentences (a pause of 0.15 s at least), no word.
    assert max(b["start"] - a["end"] for a, b in itertools.pairwise(words)) >= 0.15
    assert words[-1]["end"] <= audio.duration <= words[-1]["end"] + 0.3

    aac = words_of(
        events(
            server,
            model="espeak",
            input=SPOKEN,
            response_format="aac",
            timestamp_granularities=["word"],
        )
    )
    shifts = [ours["start"] - theirs["start"] for ours, theirs in zip(aac, words, strict=True)]
    # Two runs of espeak-ng place a sentence's words a few milliseconds apart now and then
    # (seen: 4 ms, for a whole sentence): the median shift is none.
    assert float(np.median(shifts)) == pytest.approx(0.0, abs=0.0011)
    assert all(shift == pytest.approx(0.0, abs=0.02) for shift in shifts)
