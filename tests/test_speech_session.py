"""Streaming sessions through the WebSocket route of a real server on the fake engine (and
espeak-ng), whose pool says which jobs ran and how they ended: a sentence is spoken ahead while
the word after it is still being written (its audio sent only if that word starts a new
sentence), text written token by token is heard as the whole text would be, false periods
included (over Wyoming too), and text written too far ahead of the audio is refused (and not
kept)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection
from wyoming.client import AsyncTcpClient
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from speechgate.audio.formats import AudioFormat
from speechgate.engines.base import SynthesisRequest
from speechgate.errors import InvalidRequest
from speechgate.pipeline import OutputSpec
from speechgate.service import SpeechPlan, SpeechService
from speechgate.speech_session import MAX_PENDING_CHARS, SpeechSession
from speechgate.text.segment import Segmenter, SegmentLimits, segment
from speechgate.workers.interface import Pool
from tests.helpers.server import RunningServer, free_port, running_server
from tests.helpers.settings import fake_settings
from tests.helpers.streaming import session_events, speech_session
from tests.helpers.tenancy import spy_usage
from tests.helpers.waiting import until, wait_for
from tests.helpers.wyoming import Audio, read_audio


def send(ws: ClientConnection, delta: str) -> None:
    ws.send(json.dumps({"type": "input_text.delta", "delta": delta}))


def one_shot_length(server: RunningServer, text: str) -> int:
    """Bytes of raw PCM the fake engine says `text` in, asked whole over HTTP."""
    answer = httpx.post(
        f"{server.url}/v1/audio/speech",
        json={"model": "fake", "voice": "alloy", "input": text, "response_format": "pcm"},
        timeout=60,
    )
    answer.raise_for_status()
    return len(answer.content)


def speak_with_a_pause(
    server: RunningServer, written: str, then: str
) -> tuple[list[str], bytes, dict[str, int]]:
    """Send `written`, wait until its job runs (only a guess can start it), then send `then`
    and end the text: the segments spoken, the audio, the pool's job outcomes meanwhile."""
    pool = server.runtime.pools["fake"]
    before = dict(pool.stats().jobs)
    with speech_session(server, model="fake", response_format="pcm") as ws:
        send(ws, written)
        wait_for(lambda: pool.stats().in_flight == 1 or pool.stats().jobs != before)
        send(ws, then)
        ws.send(json.dumps({"type": "input_text.done"}))
        events, audio = session_events(ws)
    assert events[-1]["type"] == "session.done", events[-1]
    wait_for(lambda: pool.stats().in_flight == 0)
    after = pool.stats().jobs
    outcomes = {outcome: after.get(outcome, 0) - before.get(outcome, 0) for outcome in after}
    segments = [event["text"] for event in events if event["type"] == "segment.started"]
    return segments, audio, outcomes


def test_a_sentence_is_spoken_ahead_and_sent_when_the_next_one_starts(
    fake_server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = spy_usage(fake_server, monkeypatch, "ws_")
    segments, audio, jobs = speak_with_a_pause(fake_server, "Hello there.", " This is next.")
    assert segments == ["Hello there.", "This is next."]
    assert jobs["completed"] == 2 and not jobs["cancelled"]
    wait_for(lambda: len(records) == 1)
    assert records[0].characters == len("Hello there. This is next.") - 1
    assert len(audio) == one_shot_length(fake_server, "Hello there. This is next.")


def test_a_wrong_guess_is_cancelled_and_never_heard(
    fake_server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = spy_usage(fake_server, monkeypatch, "ws_")
    segments, audio, jobs = speak_with_a_pause(fake_server, "It costs 3.", "14 today.")
    # "3." was spoken ahead as a sentence; "14" went on with it: one segment heard, of two jobs
    # (the guess's is cancelled, unless the fake engine, quick as it is, finished it first).
    assert segments == ["It costs 3.14 today."]
    assert jobs["cancelled"] + jobs["completed"] == 2 and not jobs["failed"]
    # The guess's characters are counted once, not again with the segment that held them.
    wait_for(lambda: len(records) == 1)
    assert records[0].characters == len("It costs 3.14 today.")
    assert len(audio) == one_shot_length(fake_server, "It costs 3.14 today.")


def test_text_written_too_far_ahead_of_the_audio_is_refused(fake_server: RunningServer) -> None:
    with speech_session(fake_server, model="fake", response_format="pcm") as ws:
        send(ws, "Hello. " * (MAX_PENDING_CHARS // 7 + 1))
        events, _ = session_events(ws)
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
    assert events[-1]["type"] == "error"
    assert events[-1]["error"]["code"] == "too_much_pending_text"
    assert ws.close_code == 1008


@pytest.fixture(scope="module")
def slow_fake() -> Iterator[RunningServer]:
    """The fake engine taking 0.3 s over each sentence, as a real one takes time."""
    settings = fake_settings(engine_options={"fake": {"chunk_delay": "0.3"}})
    with running_server(settings) as running:
        yield running


def test_a_guess_s_first_audio_counts_from_the_word_that_confirms_it(
    slow_fake: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time to first audio (metrics, usage) is the server's: a client that is slow to
    write the next word does not add its wait to it."""
    records = spy_usage(slow_fake, monkeypatch, "ws_")
    pool = slow_fake.runtime.pools["fake"]
    before = pool.stats().jobs["completed"]
    with speech_session(slow_fake, model="fake", response_format="pcm") as ws:
        send(ws, "Hello there.")
        wait_for(lambda: pool.stats().in_flight == 1)
        started = time.monotonic()
        # The guess is synthesized whole while the next word is still unwritten.
        wait_for(lambda: pool.stats().jobs["completed"] > before)
        waited = time.monotonic() - started
        send(ws, " This is next.")
        ws.send(json.dumps({"type": "input_text.done"}))
        events, _ = session_events(ws)
    assert events[-1]["type"] == "session.done", events[-1]
    wait_for(lambda: len(records) == 1)
    first_audio = records[0].time_to_first_audio
    assert first_audio is not None and first_audio < waited


class _NoPools:
    """A service whose pools are never reached: text is added, nothing is spoken."""

    def pool(self, engine: str) -> None:
        return None

    def segment_limits(self, engine: str) -> SegmentLimits:
        return SegmentLimits()


def test_refused_text_is_not_counted_as_pending() -> None:
    plan = SpeechPlan(
        engine="fake",
        engine_rate=16_000,
        request=SynthesisRequest("", "alloy"),
        output=OutputSpec(AudioFormat.PCM, 16_000),
        stream_format="audio",
        instructions_ignored=False,
    )
    service: SpeechService = _NoPools()  # type: ignore[assignment]
    session = SpeechSession(service, plan, max_pending_chars=20)
    session.add_text("No end of sentence ")
    with pytest.raises(InvalidRequest) as refused:
        session.add_text("x" * 10)
    assert refused.value.code == "too_much_pending_text"
    # What was refused is neither pending nor billed: text that fits is still taken.
    session.add_text("y")
    assert session.characters == len("No end of sentence y")


# Periods that end no sentence, each written as the end of a piece (the next piece decides):
# an abbreviation before a lower-case word, a domain, a decimal, a title, initials; and a
# sentence that does end in a number.
TRAPS = (
    "The fee is approx. five dollars. See example.com for the rules. Dr. Smith measured 3.14 "
    "metres. The U.S. team scored 42. Then it rained."
)
WRONG_GUESSES = ("See example.", "Dr. Smith measured 3.")


def tokens(text: str, breaks: tuple[str, ...]) -> list[str]:
    """`text` in pieces of 1 to 4 characters, as an LLM writes it, with a piece ending at the
    end of each of `breaks`."""
    ends = {text.index(part) + len(part) for part in breaks}
    pieces, at, sizes = [], 0, itertools.cycle([3, 1, 4, 2, 2, 4, 1, 3])
    while at < len(text):
        end = min(at + next(sizes), len(text))
        end = min([end, *(e for e in ends if at < e < end)])
        pieces.append(text[at:end])
        at = end
    return pieces


def jobs_due(pieces: list[str], guesses: tuple[str, ...]) -> Iterator[tuple[str, int | None]]:
    """Each of `pieces`, with, where it ends one of `guesses`, how many jobs a session has run
    once that guess's has: one per segment the text so far completes, one per guess (each
    wrong: the next piece goes on with its sentence)."""
    segmenter, written, released, guessed = Segmenter(), "", 0, 0
    for piece in pieces:
        written += piece
        released += len(list(segmenter.feed(piece)))
        if written.endswith(guesses):
            guessed += 1
            yield piece, released + guessed
        else:
            yield piece, None


def jobs_run(pool: Pool, before: dict[str, int]) -> int:
    return sum(pool.stats().jobs.values()) - sum(before.values())


def stream_tokens(
    server: RunningServer, engine: str, pieces: list[str], guesses: tuple[str, ...]
) -> tuple[list[dict[str, Any]], bytes, dict[str, int]]:
    """Send `pieces` to a session (30 ms apart, as an LLM writes) and end the text; after each
    piece that ends one of `guesses`, wait until the job speaking it ahead has finished (its
    audio rendered, waiting on the next piece): the events, the audio, the pool's job outcomes
    meanwhile."""
    pool = server.runtime.pools[engine]
    before = dict(pool.stats().jobs)
    with (
        speech_session(server, model=engine, response_format="pcm") as ws,
        concurrent.futures.ThreadPoolExecutor(1) as reader,
    ):
        received = reader.submit(session_events, ws)  # audio is read as it comes
        for piece, due in jobs_due(pieces, guesses):
            send(ws, piece)
            if due is not None:
                wait_for(lambda due=due: jobs_run(pool, before) >= due)
            time.sleep(0.03)
        ws.send(json.dumps({"type": "input_text.done"}))
        events, audio = received.result(timeout=120)
    assert events[-1]["type"] == "session.done", events[-1]
    wait_for(lambda: pool.stats().in_flight == 0)
    after = pool.stats().jobs
    return events, audio, {outcome: after[outcome] - before.get(outcome, 0) for outcome in after}


def whole_pcm(server: RunningServer, engine: str, text: str) -> bytes:
    body = {"model": engine, "voice": "alloy", "input": text, "response_format": "pcm"}
    answer = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60)
    answer.raise_for_status()
    return answer.content


def segment_spans(events: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """Each segment's text and how long its audio lasts."""
    spoken = [event["text"] for event in events if event["type"] == "segment.started"]
    done = [event for event in events if event["type"] == "segment.done"]
    return [(text, e["audio_end"] - e["audio_start"]) for text, e in zip(spoken, done, strict=True)]


@pytest.fixture(scope="module")
def fake_wyoming() -> Iterator[tuple[RunningServer, int]]:
    """The fake engine served over Wyoming too: the server and its Wyoming port. Its sessions
    send as fast as the client reads (held to real time, a session of the traps would wait out
    most of its seconds of audio; the pacer is test_stream_limits' subject)."""
    port = free_port()
    settings = fake_settings(
        wyoming={"uri": f"tcp://127.0.0.1:{port}"}, sessions={"max_lead_seconds": 0}
    )
    with running_server(settings) as running:
        yield running, port


def test_false_periods_spoken_ahead_are_never_heard(
    fake_wyoming: tuple[RunningServer, int],
) -> None:
    """Each false period's take is synthesized whole (the fake engine's tone, as long as its
    text, marks it) and dropped: what is heard is the whole text's audio, byte for byte."""
    fake_server, _ = fake_wyoming
    pieces = tokens(TRAPS, WRONG_GUESSES)
    events, audio, jobs = stream_tokens(fake_server, "fake", pieces, WRONG_GUESSES)
    assert [text for text, _ in segment_spans(events)] == segment(TRAPS)
    assert jobs["completed"] == len(segment(TRAPS)) + len(WRONG_GUESSES)
    assert audio == whole_pcm(fake_server, "fake", TRAPS)


@pytest.mark.slow
def test_espeak_text_streamed_in_tokens_is_spoken_as_the_whole_text(
    server: RunningServer,
) -> None:
    """A real engine: text written token by token, its false periods spoken ahead and their
    takes cancelled, is spoken in the same segments, each as long, as the whole text.
    (espeak-ng's samples are not the same from one run to the next, even for one request
    repeated, and now and then a segment's length differs by tens of milliseconds too; a
    false period's take would add most of a second.)"""
    pieces = tokens(TRAPS, WRONG_GUESSES)
    events, audio, jobs = stream_tokens(server, "espeak", pieces, WRONG_GUESSES)
    # One job a segment, and one for each false period's take.
    assert sum(jobs.values()) == len(segment(TRAPS)) + len(WRONG_GUESSES)
    assert not jobs["failed"]
    with speech_session(server, model="espeak", response_format="pcm") as ws:
        send(ws, TRAPS)
        ws.send(json.dumps({"type": "input_text.done"}))
        whole, _ = session_events(ws)
    streamed, at_once = segment_spans(events), segment_spans(whole)
    assert [text for text, _ in streamed] == [text for text, _ in at_once] == segment(TRAPS)
    for (_, ours), (_, theirs) in zip(streamed, at_once, strict=True):
        assert ours == pytest.approx(theirs, abs=0.1)
    # Bytes of pcm (24 kHz, 16-bit) in 0.1 s a segment.
    slack = len(streamed) * 4800
    assert len(audio) == pytest.approx(len(whole_pcm(server, "espeak", TRAPS)), abs=slack)


def test_a_wyoming_stream_with_false_periods_is_heard_as_the_whole_text(
    fake_wyoming: tuple[RunningServer, int],
) -> None:
    """A `synthesize-chunk` stream is a session as well: false periods spoken ahead are dropped,
    and the audio is what one `synthesize` of the whole text says."""
    server, port = fake_wyoming
    pool = server.runtime.pools["fake"]
    voice = SynthesizeVoice(name="en-high")

    async def streamed() -> Audio:
        async with AsyncTcpClient("127.0.0.1", port) as connection:
            await connection.write_event(SynthesizeStart(voice=voice).event())
            heard = asyncio.create_task(read_audio(connection))  # audio is read as it comes
            for piece, due in jobs_due(tokens(TRAPS, WRONG_GUESSES), WRONG_GUESSES):
                await connection.write_event(SynthesizeChunk(text=piece).event())
                if due is not None:
                    await until(lambda due=due: jobs_run(pool, before) >= due)
                await asyncio.sleep(0.03)
            await connection.write_event(SynthesizeStop().event())
            return await heard

    async def whole() -> Audio:
        async with AsyncTcpClient("127.0.0.1", port) as connection:
            await connection.write_event(Synthesize(text=TRAPS, voice=voice).event())
            return await read_audio(connection)

    before = dict(pool.stats().jobs)
    ours = asyncio.run(streamed())
    wait_for(lambda: pool.stats().in_flight == 0)
    completed = pool.stats().jobs["completed"] - before["completed"]
    assert completed == len(segment(TRAPS)) + len(WRONG_GUESSES)
    assert ours.pcm == asyncio.run(whole()).pcm
