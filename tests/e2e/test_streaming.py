"""Long input streamed completely and early; text spoken while it is being written."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from speechgate.audio.formats import OPENAI_FORMATS, AudioFormat
from speechgate.text.segment import segment
from tests.helpers.audio import DecodedAudio, decode_audio
from tests.helpers.server import RunningServer
from tests.helpers.streaming import read_streamed, session_events, speech_session
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.slow

SENTENCES = [
    f"Paragraph {n} begins here, and it carries on for a while with ordinary words."
    for n in range(40)
]
LAST = "The very last sentence ends the story."
LONG = " ".join([*SENTENCES, LAST])  # about 3,000 characters
# The long input spoken four times as fast: as long an input (its length is the subject), a
# quarter of the audio to encode (at OpenAI's speed, 3.5 minutes: most of this module's time).
FAST = 4.0


def speech(
    server: RunningServer, text: str, fmt: str, model: str = "espeak", speed: float = FAST
) -> bytes:
    body = {"model": model, "voice": "alloy", "input": text, "response_format": fmt, "speed": speed}
    response = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=300)
    assert response.status_code == 200, response.text
    return response.content


def tail_rms(audio: DecodedAudio, seconds: float) -> float:
    tail = audio.samples[-round(seconds * audio.sample_rate) :]
    return float(np.sqrt(np.mean(np.square(tail))))


@pytest.fixture(scope="module")
def reference(server: RunningServer) -> DecodedAudio:
    """The long text as raw PCM, from the same engine."""
    return decode_audio(speech(server, LONG, "pcm"), "pcm")


@pytest.fixture(scope="module")
def last_alone(server: RunningServer) -> float:
    """The duration of the long text's last sentence, spoken alone."""
    return decode_audio(speech(server, LAST, "pcm"), "pcm").duration


@pytest.mark.parametrize("fmt", OPENAI_FORMATS)
def test_long_input_streams_completely_in_every_format(
    server: RunningServer, reference: DecodedAudio, last_alone: float, fmt: AudioFormat
) -> None:
    assert len(LONG) > 3000
    body = {
        "model": "espeak",
        "voice": "alloy",
        "input": LONG,
        "response_format": fmt.value,
        "speed": FAST,
    }
    with httpx.stream("POST", f"{server.url}/v1/audio/speech", json=body, timeout=300) as response:
        parts = list(response.iter_bytes())
    assert len(parts) > len(segment(LONG)) // 2  # it really arrived in pieces
    audio = decode_audio(b"".join(parts), fmt.value)
    # One codec frame of slack per segment (mp3's 1152 samples is the largest here).
    slack = len(segment(LONG)) * 1152 / 24000
    assert abs(audio.duration - reference.duration) <= slack
    assert tail_rms(audio, last_alone * 0.8) > 0.02  # the last sentence is spoken, not cut


def test_first_audio_arrives_long_before_the_whole_text_is_done(server: RunningServer) -> None:
    # Six sentences, seconds of Piper's work. In order, not in seconds (a loaded machine
    # stretches both): the first audio is here while the worker still has the rest to speak.
    text = " ".join(SENTENCES[:6])
    body = {"model": "piper", "voice": "alloy", "input": text, "response_format": "mp3"}
    pool = server.runtime.pools["piper"]
    with httpx.stream("POST", f"{server.url}/v1/audio/speech", json=body, timeout=300) as response:
        parts, speaking_at_first_audio = read_streamed(
            response.iter_bytes(), lambda: pool.stats().in_flight == 1
        )
    assert len(parts) > 3
    assert speaking_at_first_audio


def test_text_sent_one_character_at_a_time_is_spoken_sentence_by_sentence(
    server: RunningServer,
) -> None:
    text = "Hello there. This is a streaming test! Does it work? It does."
    with speech_session(server, response_format="pcm") as ws:
        for char in text:
            ws.send(json.dumps({"type": "input_text.delta", "delta": char}))
        ws.send(json.dumps({"type": "input_text.done"}))
        events, audio = session_events(ws)
    started = [e for e in events if e["type"] == "segment.started"]
    done = [e for e in events if e["type"] == "segment.done"]
    assert [e["text"] for e in started] == segment(text)
    assert [e["segment"] for e in done] == list(range(len(started)))
    for before, after in itertools.pairwise(done):
        assert before["audio_end"] < after["audio_start"]  # in order, a pause between
    decoded = decode_audio(audio, "pcm")
    assert decoded.duration == pytest.approx(events[-1]["usage"]["audio_seconds"], abs=0.01)
    assert decoded.duration == pytest.approx(done[-1]["audio_end"], abs=0.01)
    assert decoded.rms > 0.01
    for event in done[:-1]:
        # Each join (segment end, pause) is silent: no step, which would be heard as a click.
        end = round(event["audio_end"] * decoded.sample_rate)
        around = decoded.samples[end - 24 : end + 24]
        assert np.max(np.abs(around)) < 0.02


def test_closing_mid_session_stops_synthesis(server: RunningServer) -> None:
    pool = server.runtime.pools["piper"]

    def jobs_run() -> int:
        jobs = pool.stats().jobs
        return jobs["completed"] + jobs["cancelled"]

    before = jobs_run()
    with speech_session(server, model="piper", response_format="mp3") as ws:
        ws.send(json.dumps({"type": "input_text.delta", "delta": LONG}))
        ws.send(json.dumps({"type": "input_text.done"}))
        while isinstance(ws.recv(timeout=60), str):
            pass  # until the first audio
    wait_for(lambda: pool.stats().in_flight == 0 and pool.stats().queued == 0)
    # Each segment is a job: the session stopped after the one or two it had started,
    # out of the 41 that LONG holds.
    assert 1 <= jobs_run() - before <= 3 < len(segment(LONG))


@pytest.mark.parametrize(
    ("first", "code"),
    [
        ({"type": "input_text.delta", "delta": "hi"}, 1008),
        ({"type": "session.update", "session": {"model": "nope", "voice": "alloy"}}, 1008),
        ({"type": "session.update", "session": {"model": "espeak", "voice": "nobody"}}, 1008),
        ({"type": "bogus"}, 1008),
    ],
)
def test_bad_session_messages_get_an_error_event_and_close(
    server: RunningServer, first: dict[str, Any], code: int
) -> None:
    with connect(server.url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
        ws.send(json.dumps(first))
        event = json.loads(ws.recv(timeout=30))
        assert event["type"] == "error"
        assert set(event["error"]) == {"message", "type", "param", "code"}
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
        assert ws.close_code == code


@pytest.mark.parametrize("fmt", ["mp3", "aac", "opus"])
def test_segment_times_point_into_the_decoded_stream(server: RunningServer, fmt: str) -> None:
    # espeak-ng is deterministic, so the same text in pcm is the reference.
    text = "Hello there. This is a streaming test! Does it work? It does."

    def session(response_format: str) -> tuple[list[dict[str, Any]], DecodedAudio]:
        with speech_session(server, response_format=response_format) as ws:
            ws.send(json.dumps({"type": "input_text.delta", "delta": text}))
            ws.send(json.dumps({"type": "input_text.done"}))
            events, audio = session_events(ws)
        done = [e for e in events if e["type"] == "segment.done"]
        return done, decode_audio(audio, response_format)

    reference_done, reference = session("pcm")
    done, decoded = session(fmt)
    # Where the reference sits in the decoded stream: the lag (in 1 ms steps) that best lines
    # up their loudness envelopes, which a lossy codec keeps while it changes the waveform.
    lag = best_lag(envelope(decoded), envelope(reference), most=200)
    for ours, theirs in zip(done, reference_done, strict=True):
        # The times must say where each segment is in the decoded stream, whatever a codec
        # plays first there (AAC's priming frame is not sent; mp3 marks its delay). The
        # envelope lag of a lossy stream is good to a few ms (seen: 47 ms for an exact 42.7
        # when the chunking differed).
        for key in ("audio_start", "audio_end"):
            assert ours[key] - theirs[key] == pytest.approx(lag / 1000, abs=0.008)


def envelope(audio: DecodedAudio) -> npt.NDArray[np.float64]:
    """RMS per millisecond."""
    step = audio.sample_rate // 1000
    frames = audio.samples[: len(audio.samples) // step * step].reshape(-1, step)
    return np.sqrt(np.mean(np.square(frames.astype(np.float64)), axis=1))


def best_lag(signal: npt.NDArray[np.float64], reference: npt.NDArray[np.float64], most: int) -> int:
    n = len(reference) - most
    scores = [np.dot(signal[lag : lag + n], reference[:n]) for lag in range(most)]
    return int(np.argmax(scores))


@pytest.mark.parametrize("configured", [False, True], ids=["first-frame", "later-frame"])
def test_a_binary_frame_is_a_bad_message(server: RunningServer, configured: bool) -> None:
    with connect(server.url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
        if configured:
            update = {"model": "espeak", "voice": "alloy", "response_format": "pcm"}
            ws.send(json.dumps({"type": "session.update", "session": update}))
            assert json.loads(ws.recv(timeout=30))["type"] == "session.created"
        ws.send(b'{"type": "input_text.delta", "delta": "hi"}')
        event = json.loads(ws.recv(timeout=30))
        assert event["type"] == "error"
        assert event["error"]["code"] == "binary_message"
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
        assert ws.close_code == 1008
