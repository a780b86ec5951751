"""Word timestamps in a streaming session (`WS /v1/audio/speech/stream`)."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.sync.client import ClientConnection

from tests.helpers.audio import decode_audio
from tests.helpers.inprocess import InProcessApp, InProcessWebSocket, websocket
from tests.helpers.server import RunningServer

# A control character (spoken as a space) and spacing the segmenter strips: the offsets must
# count them, as the client sent them.
TEXT = (
    "  Hello there,\x07friend. This is a (streaming) test! Does it work?\n\n"
    "It does: 42 times over. The end."
)
WORDS = re.findall(r"\w+", TEXT)
PCM_RATE = 24000


@contextmanager
def session(
    server: InProcessApp | RunningServer, **options: Any
) -> Iterator[InProcessWebSocket | ClientConnection]:
    settings = {"model": "fake", "voice": "alloy", "response_format": "pcm", **options}
    with websocket(server, "/v1/audio/speech/stream") as ws:
        ws.send(json.dumps({"type": "session.update", "session": settings}))
        assert json.loads(ws.recv(timeout=30))["type"] == "session.created"
        yield ws


def speak(
    ws: InProcessWebSocket | ClientConnection, pieces: list[str]
) -> list[dict[str, Any] | bytes]:
    for piece in pieces:
        ws.send(json.dumps({"type": "input_text.delta", "delta": piece}))
    ws.send(json.dumps({"type": "input_text.done"}))
    received: list[dict[str, Any] | bytes] = []
    while True:
        message = ws.recv(timeout=60)
        received.append(message if isinstance(message, bytes) else json.loads(message))
        if isinstance(received[-1], dict) and received[-1]["type"] in ("session.done", "error"):
            return received


def test_word_times_come_before_their_audio_and_slice_the_sent_text(
    fake_app: InProcessApp,
) -> None:
    with session(fake_app, timestamp_granularities=["word"]) as ws:
        # Pieces of uneven sizes, as an LLM writes: words and segments straddle them.
        sizes = itertools.cycle([1, 3, 7, 2, 11])
        pieces, at = [], 0
        while at < len(TEXT):
            size = next(sizes)
            pieces.append(TEXT[at : at + size])
            at += size
        received = speak(ws, pieces)
    assert received[-1]["type"] == "session.done"  # type: ignore[index]

    words: list[dict[str, Any]] = []
    sent, segment = 0.0, -1
    for message in received:
        if isinstance(message, bytes):
            sent += len(message) / 2 / PCM_RATE
        elif message["type"] == "segment.started":
            segment = message["segment"]
        elif message["type"] == "segment.words":
            assert message["segment"] == segment
            assert all(word["start"] >= sent - 0.001 for word in message["words"])
            words += message["words"]
    assert [word["word"] for word in words] == WORDS
    assert [TEXT[word["start_char"] : word["end_char"]] for word in words] == WORDS
    assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(words))
    duration = decode_audio(b"".join(m for m in received if isinstance(m, bytes)), "pcm").duration
    assert all(0 <= word["start"] <= word["end"] <= duration + 0.001 for word in words)
    assert words[-1]["end"] == pytest.approx(duration, abs=0.1)


def test_a_session_that_does_not_ask_gets_no_word_events(fake_app: InProcessApp) -> None:
    with session(fake_app) as ws:
        received = speak(ws, [TEXT])
    kinds = {message["type"] for message in received if isinstance(message, dict)}
    assert kinds == {"segment.started", "segment.done", "session.done"}


@pytest.mark.slow
def test_espeak_session_words_match_the_sse_stream_of_the_same_text(
    server: RunningServer,
) -> None:
    """A real engine: a session says the same times as `POST /v1/audio/speech` for the same
    text (the same segments, the same pauses), and each word's span is speech."""
    text = "Hello there, my friend. This is a test of word times! Does it work? It does."
    with session(server, model="espeak", timestamp_granularities=["word"]) as ws:
        received = speak(ws, [text])
    ours = [
        word
        for message in received
        if isinstance(message, dict) and message["type"] == "segment.words"
        for word in message["words"]
    ]
    body = {
        "model": "espeak",
        "voice": "alloy",
        "input": text,
        "response_format": "pcm",
        "stream_format": "sse",
        "timestamp_granularities": ["word"],
    }
    response = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60)
    theirs = [
        word
        for line in response.text.splitlines()
        if line.startswith("data: ")
        and (event := json.loads(line[6:]))["type"] == "speech.audio.words"
        for word in event["words"]
    ]
    assert [w["word"] for w in ours] == [w["word"] for w in theirs] == re.findall(r"\w+", text)
    assert [w["start_char"] for w in ours] == [w["start_char"] for w in theirs]
    # Two runs of espeak-ng place a sentence's words a few milliseconds apart now and then.
    for a, b in zip(ours, theirs, strict=True):
        assert a["start"] == pytest.approx(b["start"], abs=0.02)
        assert a["end"] == pytest.approx(b["end"], abs=0.02)
    audio = decode_audio(b"".join(m for m in received if isinstance(m, bytes)), "pcm")
    for word in ours:
        span = audio.samples[round(word["start"] * PCM_RATE) : round(word["end"] * PCM_RATE)]
        assert np.sqrt(np.mean(np.square(span))) > 0.02, word
