"""Each Wyoming event speechgate answers (describe, ping, synthesize, streamed synthesis, an
error), on the fake engine, from the app run in-process with its Wyoming listener: the inner
loop's (`make test-fast`) cover of this front end. test_wyoming.py is the end-to-end module,
with the real engines."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from speechgate.engines.fake import SAMPLE_RATE, SECONDS_PER_CHARACTER
from tests.helpers.inprocess import in_process
from tests.helpers.server import free_port
from tests.helpers.settings import fake_settings
from tests.helpers.wyoming import Audio, read, read_audio

HIGH = SynthesizeVoice(name="en-high")
TEXT = "Hello from speechgate. This is the fake engine."


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    port = free_port()
    with in_process(fake_settings(wyoming={"uri": f"tcp://127.0.0.1:{port}"})):
        yield port


def talk(port: int, *events: Event, answers: int = 1) -> list[Event]:
    """Send `events`, then read `answers` events."""

    async def go() -> list[Event]:
        async with AsyncTcpClient("127.0.0.1", port) as connection:
            for event in events:
                await connection.write_event(event)
            return [await read(connection) for _ in range(answers)]

    return asyncio.run(go())


def spoken(port: int, text: str) -> Audio:
    async def go() -> Audio:
        async with AsyncTcpClient("127.0.0.1", port) as connection:
            await connection.write_event(Synthesize(text=text, voice=HIGH).event())
            return await read_audio(connection)

    return asyncio.run(go())


def test_describe_lists_the_engine_and_its_voices(port: int) -> None:
    (answer,) = talk(port, Describe().event())
    [program] = Info.from_event(answer).tts
    assert program.name == "fake" and program.supports_synthesize_streaming
    assert [voice.name for voice in program.voices] == ["en-high", "en-low", "de-mid"]


def test_ping_is_answered(port: int) -> None:
    (answer,) = talk(port, Ping(text="there?").event())
    assert Pong.from_event(answer).text == "there?"


def test_synthesize_is_spoken_at_the_engines_rate_and_the_texts_length(port: int) -> None:
    audio = spoken(port, TEXT)
    assert audio.rate == SAMPLE_RATE
    sounded = len(TEXT.replace(" ", "")) * SECONDS_PER_CHARACTER
    assert sounded < audio.duration < sounded + 1.0
    assert audio.rms > 0.02


def test_streamed_text_is_spoken_then_stopped(port: int) -> None:
    async def go() -> tuple[list[Event], Audio]:
        async with AsyncTcpClient("127.0.0.1", port) as connection:
            await connection.write_event(SynthesizeStart(voice=HIGH).event())
            for piece in ["Hello fr", "om speechgate. This is the ", "fake engine."]:
                await connection.write_event(SynthesizeChunk(text=piece).event())
            await connection.write_event(Synthesize(text=TEXT, voice=HIGH).event())
            await connection.write_event(SynthesizeStop().event())
            events: list[Event] = []
            while not SynthesizeStopped.is_type((event := await read(connection)).type):
                events.append(event)
            # The compatibility `synthesize` was not spoken: the next request is answered.
            await connection.write_event(Synthesize(text="Next.", voice=HIGH).event())
            return events, await read_audio(connection)

    events, after = asyncio.run(go())
    start = AudioStart.from_event(events[0])
    pcm = b"".join(AudioChunk.from_event(e).audio for e in events[1:-1])
    audio = Audio(start.rate, bytearray(pcm))
    sounded = len(TEXT.replace(" ", "")) * SECONDS_PER_CHARACTER
    assert sounded < audio.duration < sounded + 1.0
    assert after.duration < 1.0


def test_an_unknown_voice_is_an_error_and_the_connection_stays_usable(port: int) -> None:
    nobody = SynthesizeVoice(name="nobody-at-all")
    error, pong = talk(
        port, Synthesize(text="Hi.", voice=nobody).event(), Ping().event(), answers=2
    )
    assert Error.from_event(error).code == "voice_not_found"
    assert Pong.is_type(pong.type)
