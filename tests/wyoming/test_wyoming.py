"""The Wyoming server, driven by the `wyoming` package's own client against a real server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
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

from speechgate.metering.records import CLIENT_CLOSED
from speechgate.text.segment import segment
from tests.helpers.server import RunningServer, free_port, running_server
from tests.helpers.settings import make_settings
from tests.helpers.tenancy import spy_usage
from tests.helpers.waiting import until, wait_for
from tests.helpers.wyoming import Audio, read, read_audio

pytestmark = pytest.mark.slow

ESPEAK = SynthesizeVoice(name="en-us")
MAX_INPUT_CHARS = make_settings().text.max_input_chars
LONG = " ".join(f"Sentence number {n} is here, and it goes on for a while." for n in range(30))


@dataclass
class Wyoming:
    server: RunningServer
    port: int


@pytest.fixture(scope="module")
def wyoming() -> Iterator[Wyoming]:
    port = free_port()
    settings = make_settings(pool={"workers": 1}, wyoming={"uri": f"tcp://127.0.0.1:{port}"})
    with running_server(settings) as server:
        yield Wyoming(server, port)


def client(wyoming: Wyoming) -> AsyncTcpClient:
    return AsyncTcpClient("127.0.0.1", wyoming.port)


def test_describe_lists_every_engine_and_its_voices(wyoming: Wyoming) -> None:
    async def go() -> Info:
        async with client(wyoming) as connection:
            await connection.write_event(Describe().event())
            return Info.from_event(await read(connection))

    info = asyncio.run(go())
    programs = {program.name: program for program in info.tts}
    assert set(programs) == {"piper", "espeak"}
    catalog = wyoming.server.runtime.catalog
    for name, program in programs.items():
        assert program.supports_synthesize_streaming
        assert program.installed
        assert [voice.name for voice in program.voices] == [v.id for v in catalog.voices(name)]
        assert all(voice.installed and voice.attribution.name for voice in program.voices)
    assert "en_US-joe-medium" in [voice.name for voice in programs["piper"].voices]
    espeak = {voice.name: voice for voice in programs["espeak"].voices}
    assert espeak["en-us"].languages == ["en-US"]


def test_one_synthesize_is_spoken_at_the_engines_rate(
    wyoming: Wyoming, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "Hello from speechgate. This is a short test of the Wyoming server."
    records = spy_usage(wyoming.server, monkeypatch)
    pool = wyoming.server.runtime.pools["espeak"]
    jobs_before = pool.stats().jobs["completed"]

    async def go() -> Audio:
        async with client(wyoming) as connection:
            await connection.write_event(Synthesize(text=text, voice=ESPEAK).event())
            return await read_audio(connection)

    audio = asyncio.run(go())
    assert audio.rate == wyoming.server.runtime.catalog.engines["espeak"].sample_rate
    assert 2.0 < audio.duration < 10.0
    assert audio.rms > 0.02  # speech, not silence
    wait_for(lambda: len(records) == 1)
    (record,) = records
    assert record.request_id.startswith("wyoming_") and record.key_id is None
    assert (record.engine, record.voice, record.status) == ("espeak", "en-us", 200)
    assert record.characters == len(text)
    assert record.audio_seconds == pytest.approx(audio.duration, abs=0.01)
    # Its segments follow each other in one job, with no round trip between them.
    assert len(segment(text)) > 1
    assert pool.stats().jobs["completed"] == jobs_before + 1


def test_piper_by_voice_name(wyoming: Wyoming) -> None:
    async def go() -> Audio:
        async with client(wyoming) as connection:
            voice = SynthesizeVoice(name="en_US-joe-medium")
            await connection.write_event(Synthesize(text="Good evening.", voice=voice).event())
            return await read_audio(connection)

    audio = asyncio.run(go())
    assert audio.rate == 22050
    assert 0.4 < audio.duration < 4.0
    assert audio.rms > 0.02


def test_streamed_text_is_spoken_before_it_is_finished(wyoming: Wyoming) -> None:
    # Cut mid-word and mid-number, as an LLM's tokens come.
    pieces = ["The answer is forty", "-two. Or it is 1", "23.5 deg", "rees today. ", "And then"]

    async def go() -> tuple[Audio, list[Event]]:
        async with client(wyoming) as connection:
            await connection.write_event(SynthesizeStart(voice=ESPEAK).event())
            for piece in pieces:
                await connection.write_event(SynthesizeChunk(text=piece).event())
            # The first sentence is complete: its audio comes before the text is finished.
            start = AudioStart.from_event(await read(connection))
            first = AudioChunk.from_event(await read(connection))
            await connection.write_event(SynthesizeChunk(text=" some more.").event())
            # A streaming client also sends the whole text, for servers that cannot stream.
            whole = "".join(pieces) + " some more."
            await connection.write_event(Synthesize(text=whole, voice=ESPEAK).event())
            await connection.write_event(SynthesizeStop().event())
            audio = Audio(start.rate, bytearray(first.audio), 1)
            rest: list[Event] = []
            while not SynthesizeStopped.is_type((event := await read(connection)).type):
                rest.append(event)
            # What follows is the next request's: the compatibility `synthesize` was not spoken.
            await connection.write_event(Synthesize(text="Next.", voice=ESPEAK).event())
            next_audio = await read_audio(connection)
            assert next_audio.duration < 1.5
            return audio, rest

    audio, rest = asyncio.run(go())
    assert AudioStop.is_type(rest[-1].type)
    for event in rest[:-1]:
        audio.pcm += AudioChunk.from_event(event).audio
    assert 3.0 < audio.duration < 15.0
    assert audio.rms > 0.02


def test_two_clients_at_once(wyoming: Wyoming) -> None:
    async def one(text: str) -> Audio:
        async with client(wyoming) as connection:
            await connection.write_event(Synthesize(text=text, voice=ESPEAK).event())
            return await read_audio(connection)

    finished: list[str] = []

    async def long_one() -> Audio:
        async with client(wyoming) as connection:
            await connection.write_event(Synthesize(text=LONG, voice=ESPEAK).event())
            started.set()
            audio = await read_audio(connection)
            finished.append("long")
            return audio

    async def short_one() -> Audio:
        await started.wait()
        audio = await one("The second client speaks.")
        finished.append("short")
        return audio

    async def go() -> tuple[Audio, Audio]:
        return await asyncio.gather(short_one(), long_one())

    started = asyncio.Event()
    short, long = asyncio.run(go())
    # The second is answered while the first still speaks, not after it.
    assert finished == ["short", "long"]
    assert 0.5 < short.duration < long.duration
    assert short.rms > 0.02 and long.rms > 0.02


def test_a_client_closing_mid_audio_frees_its_worker(
    wyoming: Wyoming, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = spy_usage(wyoming.server, monkeypatch)
    pool = wyoming.server.runtime.pools["espeak"]
    before = dict(pool.stats().jobs)

    async def go() -> None:
        async with client(wyoming) as connection:
            await connection.write_event(Synthesize(text=LONG, voice=ESPEAK).event())
            await read(connection)  # audio-start
            await read(connection)  # the first chunk, then away

    asyncio.run(go())
    wait_for(lambda: pool.stats().in_flight == 0 and pool.stats().queued == 0)
    # The synthesis is one job: cancelled in its worker when the client left, not run to its
    # end (unread, a job pauses a few segments in; it has 30).
    jobs = pool.stats().jobs
    assert jobs["cancelled"] - before["cancelled"] == 1
    assert jobs["completed"] == before["completed"]
    wait_for(lambda: len(records) == 1)
    assert records[0].status == CLIENT_CLOSED


def test_bad_requests_get_an_error_and_the_connection_stays_usable(wyoming: Wyoming) -> None:
    async def go() -> tuple[Error, Error, Error, Pong, Audio]:
        async with client(wyoming) as connection:
            nobody = SynthesizeVoice(name="nobody-at-all")
            await connection.write_event(Synthesize(text="Hello.", voice=nobody).event())
            unknown = Error.from_event(await read(connection))
            await connection.write_event(Synthesize(text="  ", voice=ESPEAK).event())
            empty = Error.from_event(await read(connection))
            huge = "Words. " * (MAX_INPUT_CHARS // 7 + 1)
            await connection.write_event(Synthesize(text=huge, voice=ESPEAK).event())
            too_long = Error.from_event(await read(connection))
            await connection.write_event(Ping(text="still there?").event())
            pong = Pong.from_event(await read(connection))
            await connection.write_event(Synthesize(text="Yes.", voice=ESPEAK).event())
            return unknown, empty, too_long, pong, await read_audio(connection)

    unknown, empty, too_long, pong, audio = asyncio.run(go())
    assert "nobody-at-all" in unknown.text and unknown.code == "voice_not_found"
    assert empty.code == "invalid_value" and "text to speak" in empty.text  # as over HTTP
    # The same bound as an HTTP request's input.
    assert too_long.code == "string_above_max_length" and str(MAX_INPUT_CHARS) in too_long.text
    assert pong.text == "still there?"
    assert audio.duration > 0.2 and audio.rms > 0.02


def test_a_full_queue_answers_an_error_at_once_and_the_connection_stays_usable() -> None:
    port = free_port()
    settings = make_settings(
        engines=["fake"],
        default_engine="fake",
        # Each segment takes 1.5 s: the one job that holds the only worker stays running while
        # the second request is answered (in milliseconds: it is refused at admission).
        engine_options={"fake": {"chunk_delay": "1.5"}},
        # Nobody may wait: a busy worker means a full queue.
        pool={"workers": 1, "jobs_per_worker": 1, "queue_size": 0},
        wyoming={"uri": f"tcp://127.0.0.1:{port}"},
    )
    fake = SynthesizeVoice(name="en-high")

    async def go(server: RunningServer) -> tuple[Error, int, Audio]:
        pool = server.runtime.pools["fake"]
        async with (
            AsyncTcpClient("127.0.0.1", port) as holder,
            AsyncTcpClient("127.0.0.1", port) as connection,
        ):
            # One segment, one job: no gap between sentences' jobs for the second to slip in.
            await holder.write_event(Synthesize(text="A held worker", voice=fake).event())
            await until(lambda: pool.stats().in_flight == 1)
            await connection.write_event(Synthesize(text="Me too.", voice=fake).event())
            full = Error.from_event(await read(connection))
            # Answered while the worker is still held, not once it came free.
            busy = pool.stats().in_flight
            await read_audio(holder)
            await connection.write_event(Synthesize(text="Now me.", voice=fake).event())
            return full, busy, await read_audio(connection)

    with running_server(settings) as server:
        full, busy, audio = asyncio.run(go(server))
    assert full.code == "queue_full" and full.text
    assert busy == 1
    assert audio.duration > 0.3 and audio.rms > 0.02


@pytest.mark.parametrize("uri", ["unix:///tmp/wyoming.sock", "tcp://127.0.0.1", "127.0.0.1:10200"])
def test_only_a_tcp_address_with_a_port_is_accepted(uri: str) -> None:
    with pytest.raises(ValueError, match=r"wyoming\.uri"):
        make_settings(wyoming={"uri": uri})
