"""The Wyoming server against hostile or careless clients, on the fake engine: whose voices and
limits a connection gets, bounds on what it may send and hold, idle connections, bad events."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import tracemalloc
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from speechgate.api.app import create_app
from speechgate.metering.key_secrets import KeyLimits
from speechgate.service import SpeechPlan, SpeechStream
from speechgate.settings import Settings
from speechgate.wyoming import listener
from speechgate.wyoming.handler import BadEventLog
from tests.helpers.server import RunningServer, free_port, running_server
from tests.helpers.settings import fake_settings, merged
from tests.helpers.tenancy import ADMIN_KEY, spy_usage, stored_key
from tests.helpers.waiting import wait_for
from tests.helpers.wyoming import read, read_audio

pytestmark = pytest.mark.slow

_TIMEOUT = 20.0
FAKE = SynthesizeVoice(name="en-high")
PRIVATE = "tenant_private"


@dataclass
class Wyoming:
    server: RunningServer
    port: int

    def client(self) -> AsyncTcpClient:
        return AsyncTcpClient("127.0.0.1", self.port)

    async def raw(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)


def _settings(data_dir: Path, **overrides: object) -> Settings:
    defaults = {
        "default_engine": "fake",
        "data_dir": data_dir,
        "wyoming": {"uri": "tcp://127.0.0.1:0"},
    }
    return fake_settings(**merged(defaults, overrides))


@contextmanager
def serving(settings: Settings) -> Iterator[Wyoming]:
    port = free_port()
    settings = settings.model_copy(
        update={"wyoming": settings.wyoming.model_copy(update={"uri": f"tcp://127.0.0.1:{port}"})}
    )
    with running_server(settings) as server:
        yield Wyoming(server, port)


# Tests that need no settings of their own share a server per group of settings, started once.
@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wyoming]:
    """The fake engine with the default bounds."""
    with serving(_settings(tmp_path_factory.mktemp("plain"))) as wyoming:
        yield wyoming


SHORT_INPUT = 100


@pytest.fixture(scope="module")
def short_inputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wyoming]:
    """Inputs of at most `SHORT_INPUT` characters, so that a test's text can be over it."""
    settings = _settings(tmp_path_factory.mktemp("short"), text={"max_input_chars": SHORT_INPUT})
    with serving(settings) as wyoming:
        yield wyoming


def _new_key(data_dir: Path, limits: KeyLimits | None = None) -> str:
    return stored_key(data_dir, limits)[0]


def _planned(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[SpeechPlan], list[object]]:
    """The plans the service opens from now on, and whom it shares the workers between."""
    plans: list[SpeechPlan] = []
    principals: list[object] = []
    service = server.runtime.service
    opened = service.open

    async def spy(
        plan: SpeechPlan, sender: Hashable | None = None, principal: Hashable = None
    ) -> SpeechStream:
        plans.append(plan)
        principals.append(principal)
        return await opened(plan, sender, principal)

    monkeypatch.setattr(service, "open", spy)
    return plans, principals


async def _exchange(wyoming: Wyoming, *events: Event) -> Event:
    async with wyoming.client() as connection:
        for event in events:
            await connection.write_event(event)
        return await read(connection)


# --- whose voices and limits (D1; #32's admission) --------------------------------------------


def test_a_client_without_the_principal_cannot_name_a_keys_stored_voice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tmp_path, auth={"mode": "keys", "admin_key": ADMIN_KEY})
    with serving(settings) as wyoming:
        owner = _new_key(tmp_path)
        stored = wyoming.server.runtime.voices.library.add(PRIVATE, "fake", b"x", 1.0, owner)
        plans, _ = _planned(wyoming.server, monkeypatch)
        for name in (PRIVATE, stored.id):
            voice = SynthesizeVoice(name=name)
            answer = Error.from_event(
                asyncio.run(_exchange(wyoming, Synthesize(text="Hi.", voice=voice).event()))
            )
            assert answer.code == "voice_not_found", answer
        assert plans == []


def test_the_principal_gets_its_keys_voices_limits_and_usage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_id = _new_key(tmp_path, KeyLimits(requests_per_second=0.001, burst=1))
    settings = _settings(tmp_path, auth={"mode": "keys"}, wyoming={"principal": key_id})
    with serving(settings) as wyoming:
        stored = wyoming.server.runtime.voices.library.add(PRIVATE, "fake", b"x", 1.0, key_id)
        plans, principals = _planned(wyoming.server, monkeypatch)
        records = spy_usage(wyoming.server, monkeypatch)
        voice = SynthesizeVoice(name=PRIVATE)
        # Planned with the key's voice (the fake engine cannot speak a stored one: an error).
        asyncio.run(_exchange(wyoming, Synthesize(text="Hi.", voice=voice).event()))
        assert [plan.voice_id for plan in plans] == [stored.id]
        # The workers are shared fairly between keys: this is the key's share, as over HTTP.
        assert principals == [key_id]
        wait_for(lambda: len(records) == 1)
        assert records[0].key_id == key_id
        # The key's rate: one request, and its burst is spent.
        refused = Error.from_event(
            asyncio.run(_exchange(wyoming, Synthesize(text="Again.", voice=FAKE).event()))
        )
        assert refused.code == "rate_limit_exceeded"
        # Revoked: refused as an HTTP request with that key would be.
        tenancy = wyoming.server.state.tenancy
        tenancy.store.revoke_key(key_id, datetime.now(UTC).replace(tzinfo=None))
        tenancy.forget_keys()
        revoked = Error.from_event(
            asyncio.run(_exchange(wyoming, Synthesize(text="Hi.", voice=FAKE).event()))
        )
        assert revoked.code == "invalid_api_key"


def test_the_principal_must_name_a_key(tmp_path: Path) -> None:
    settings = _settings(tmp_path, auth={"mode": "keys"}, wyoming={"principal": "key_nobody"})
    app = create_app(settings)

    async def start() -> None:
        async with app.router.lifespan_context(app):
            pytest.fail("started for a key that does not exist")

    with pytest.raises(RuntimeError, match=r"wyoming\.principal 'key_nobody'"):
        asyncio.run(start())


def test_a_whole_text_has_the_same_bound_as_an_http_input(short_inputs: Wyoming) -> None:
    too_long = Synthesize(text="Words. " * (SHORT_INPUT // 7 + 1), voice=FAKE).event()
    answer = Error.from_event(asyncio.run(_exchange(short_inputs, too_long)))
    assert answer.code == "string_above_max_length" and str(SHORT_INPUT) in answer.text


# --- bounds on events (D2) --------------------------------------------------------------------


async def _refused(wyoming: Wyoming, sent: bytes) -> tuple[Error, bytes]:
    """What the server answers to `sent` (an error), and what follows it (EOF: b"")."""
    reader, writer = await wyoming.raw()
    try:
        writer.write(sent)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), _TIMEOUT)
        header = json.loads(line)
        data = json.loads(await reader.readexactly(header.get("data_length", 0)) or b"{}")
        error = Error.from_event(Event(header["type"], {**header.get("data", {}), **data}))
        rest = await asyncio.wait_for(reader.read(), _TIMEOUT)
        return error, rest
    finally:
        writer.close()


@pytest.mark.parametrize(
    "header",
    [
        {"type": "ping", "payload_length": 1 << 30},
        {"type": "synthesize", "data_length": 1 << 30},
        {"type": "ping", "payload_length": "lots"},
    ],
)
def test_an_event_over_the_bounds_is_refused_unread(
    plain: Wyoming, header: dict[str, object]
) -> None:
    sent = json.dumps(header).encode() + b"\n" + bytes(65536)
    error, rest = asyncio.run(_refused(plain, sent))
    assert error.code in ("event_too_large", "invalid_event")
    assert rest == b""


def test_a_header_line_without_end_is_refused(short_inputs: Wyoming) -> None:
    error, rest = asyncio.run(_refused(short_inputs, b'{"type": "' + b"x" * 200_000))
    assert error.code == "event_too_large"
    assert rest == b""


# --- refused stream text (D5) -----------------------------------------------------------------


def test_refused_stream_text_is_not_kept(short_inputs: Wyoming) -> None:
    # A text with no end of sentence waits whole: past max_input_chars, it is refused.
    chunk = "word " * 2000  # 10 kB, each over the bound on its own
    chunks = 2000  # 20 MB sent in all

    async def go(wyoming: Wyoming) -> tuple[list[Error], Pong, int]:
        async with wyoming.client() as connection:
            await connection.write_event(SynthesizeStart(voice=FAKE).event())
            errors: list[Error] = []

            async def collect() -> None:
                while not Pong.is_type((event := await read(connection)).type):
                    if Error.is_type(event.type):
                        errors.append(Error.from_event(event))
                pongs.append(Pong.from_event(event))

            pongs: list[Pong] = []
            reading = asyncio.create_task(collect())
            for _ in range(chunks):
                await connection.write_event(SynthesizeChunk(text=chunk).event())
            held = tracemalloc.get_traced_memory()[0] - before
            await connection.write_event(SynthesizeStop().event())
            await connection.write_event(Ping(text="still there?").event())
            await asyncio.wait_for(reading, _TIMEOUT)
            return errors, pongs[0], held

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        errors, pong, held = asyncio.run(asyncio.wait_for(go(short_inputs), 120))
    finally:
        tracemalloc.stop()
    assert [error.code for error in errors] == ["too_much_pending_text"]
    assert pong.text == "still there?"
    assert held < 5_000_000


def test_a_refused_stream_leaves_the_connection_usable(short_inputs: Wyoming) -> None:
    async def go(wyoming: Wyoming) -> tuple[Error, float]:
        async with wyoming.client() as connection:
            await connection.write_event(SynthesizeStart(voice=FAKE).event())
            await connection.write_event(SynthesizeChunk(text="word " * 30).event())
            refused = Error.from_event(await read(connection))
            await connection.write_event(SynthesizeChunk(text="More. ").event())
            await connection.write_event(SynthesizeStop().event())
            # A streaming client's whole text, after its stream: not spoken.
            await connection.write_event(
                Synthesize(text="word " * 30 + "More. ", voice=FAKE).event()
            )
            await connection.write_event(Synthesize(text="Next one.", voice=FAKE).event())
            return refused, (await read_audio(connection)).duration

    refused, duration = asyncio.run(go(short_inputs))
    assert refused.code == "too_much_pending_text"
    assert duration > 0.1


# --- open streams are bounded as WebSocket sessions are (D7) ---------------------------------


async def _stopped(connection: AsyncTcpClient, speaking: str) -> tuple[Error, float]:
    """Keep the open stream speaking until the server stops it: its error, the audio before."""
    audio = 0.0
    while True:
        event = await asyncio.wait_for(connection.read_event(), 15)
        assert event is not None, "the server closed the connection"
        if Error.is_type(event.type):
            return Error.from_event(event), audio
        if AudioChunk.is_type(event.type):
            chunk = AudioChunk.from_event(event)
            audio += len(chunk.audio) / chunk.width / chunk.rate
        if AudioStart.is_type(event.type):
            await connection.write_event(SynthesizeChunk(text=speaking).event())


def test_a_revoked_principal_stops_its_open_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_id = _new_key(tmp_path)
    settings = _settings(
        tmp_path,
        auth={"mode": "keys"},
        wyoming={"principal": key_id},
        sessions={"check_interval": 0.2},
    )

    async def go(wyoming: Wyoming) -> tuple[Error, float, Pong]:
        async with wyoming.client() as connection:
            await connection.write_event(SynthesizeStart(voice=FAKE).event())
            await connection.write_event(SynthesizeChunk(text="Hello there. And").event())
            AudioStart.from_event(await read(connection))
            tenancy = wyoming.server.state.tenancy
            tenancy.store.revoke_key(key_id, datetime.now(UTC).replace(tzinfo=None))
            tenancy.forget_keys()
            error, audio = await _stopped(connection, " more. And")
            # The stream is over: what follows it is dropped, and the connection still answers.
            await connection.write_event(SynthesizeChunk(text=" more words.").event())
            await connection.write_event(SynthesizeStop().event())
            await connection.write_event(Ping(text="there?").event())
            return error, audio, Pong.from_event(await read(connection))

    with serving(settings) as wyoming:
        records = spy_usage(wyoming.server, monkeypatch)
        error, audio, pong = asyncio.run(go(wyoming))
        wait_for(lambda: len(records) == 1)
    assert error.code == "invalid_api_key" and "revoked" in error.text
    assert pong.text == "there?"
    # What it spoke before the revocation stays billed, as a WebSocket session's does.
    assert audio > 0 and records[0].status == 200 and records[0].key_id == key_id


def test_an_open_stream_ends_at_the_maximum_length(tmp_path: Path) -> None:
    async def go(wyoming: Wyoming) -> Error:
        async with wyoming.client() as connection:
            await connection.write_event(SynthesizeStart(voice=FAKE).event())
            await connection.write_event(SynthesizeChunk(text="Hello there. And").event())
            error, _ = await _stopped(connection, " more. And")
            return error

    with serving(_settings(tmp_path, sessions={"max_seconds": 1.0})) as wyoming:
        error = asyncio.run(go(wyoming))
    assert error.code == "session_expired" and "1 s" in error.text


# --- idle connections and the connection cap (D6) ---------------------------------------------


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wyoming]:
    """Connections idle for 0.3 s are closed."""
    settings = _settings(tmp_path_factory.mktemp("idle"), wyoming={"idle_timeout": 0.3})
    with serving(settings) as wyoming:
        yield wyoming


@pytest.mark.parametrize("sent", [b"", b'{"type": "pi'])
def test_an_idle_connection_is_closed(impatient: Wyoming, sent: bytes) -> None:
    async def go(wyoming: Wyoming) -> bytes:
        reader, writer = await wyoming.raw()
        writer.write(sent)
        try:
            return await asyncio.wait_for(reader.read(), _TIMEOUT)
        finally:
            writer.close()

    assert asyncio.run(go(impatient)) == b""


def test_a_connection_past_the_cap_pushes_out_the_oldest_idle_one(tmp_path: Path) -> None:
    settings = _settings(tmp_path, server={"max_connections": 40}, wyoming={"max_connections": 3})

    async def go(wyoming: Wyoming) -> tuple[bytes, Pong]:
        opened = [await wyoming.raw() for _ in range(3)]
        await asyncio.sleep(0.2)  # all three accepted, in order
        async with wyoming.client() as connection:
            await connection.write_event(Ping(text="in").event())
            pong = Pong.from_event(await read(connection))
            oldest = await asyncio.wait_for(opened[0][0].read(), _TIMEOUT)
        for _, writer in opened:
            writer.close()
        return oldest, pong

    with serving(settings) as wyoming:
        oldest, pong = asyncio.run(go(wyoming))
    assert oldest == b"" and pong.text == "in"


def test_wyomings_connections_are_a_share_of_the_budget(tmp_path: Path) -> None:
    from speechgate.server import connection_caps

    assert connection_caps(_settings(tmp_path, server={"max_connections": 100})) == (75, 25)
    capped = _settings(tmp_path, server={"max_connections": 100}, wyoming={"max_connections": 10})
    assert connection_caps(capped) == (90, 10)
    assert connection_caps(fake_settings(server={"max_connections": 100})) == (100, 0)
    with pytest.raises(ValueError, match=r"wyoming\.max_connections"):
        _settings(tmp_path, server={"max_connections": 10}, wyoming={"max_connections": 10})


# --- bad events are answered and logged in one line -------------------------------------------


@pytest.fixture(scope="module")
def logging_every_bad_event(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wyoming]:
    """A server that writes every bad event's warning line: its own warnings are at most one
    per server every few seconds, so these tests can share it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(listener, "BadEventLog", partial(BadEventLog, interval=0.0))
        with serving(_settings(tmp_path_factory.mktemp("logging"))) as wyoming:
            yield wyoming


@pytest.mark.parametrize(
    "event",
    [
        Event("synthesize", {"voice": {"name": "en-high"}}),
        Event("synthesize", {"text": 12}),
        Event("synthesize-chunk", {"text": ["a"]}),
        Event("synthesize", {"text": "Hi.", "voice": {"name": 5}}),
    ],
)
def test_a_malformed_event_is_an_error_and_one_log_line(
    logging_every_bad_event: Wyoming, event: Event, caplog: pytest.LogCaptureFixture
) -> None:
    async def go(wyoming: Wyoming) -> tuple[Error, Pong]:
        async with wyoming.client() as connection:
            if event.type == "synthesize-chunk":
                await connection.write_event(SynthesizeStart(voice=FAKE).event())
            await connection.write_event(event)
            error = Error.from_event(await read(connection))
            await connection.write_event(Ping(text="still there?").event())
            return error, Pong.from_event(await read(connection))

    caplog.set_level(logging.WARNING)
    error, pong = asyncio.run(go(logging_every_bad_event))
    assert error.code == "invalid_event"
    assert pong.text == "still there?"
    logged = [r for r in caplog.records if r.name.startswith("speechgate.wyoming")]
    assert len(logged) == 1 and logged[0].levelno == logging.WARNING
    assert logged[0].exc_info is None
    assert not [r for r in caplog.records if r.exc_info]


def test_bad_events_warn_once_per_interval_counting_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The server above logs every bad event; a real one warns once per interval, the others
    # at debug with their traceback, counted in the next warning.
    now = [100.0]
    log = BadEventLog(interval=10.0, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="speechgate.wyoming")
    for at in (100.0, 101.0, 105.0, 110.0):
        now[0] = at
        log("client %s: event failed: %r", "peer", "bad", error=ValueError("bad"))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    debugs = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert warnings == [
        "client peer: event failed: 'bad'",
        "client peer: event failed: 'bad' (2 more since the last warning)",
    ]
    assert [r.getMessage() for r in debugs] == ["client peer: event failed: 'bad'"] * 4
    assert all(r.exc_info for r in debugs)
