"""One Wyoming connection: reads its events within bounds, runs its syntheses one after
another, and closes it when it has been idle too long."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from speechgate import tracing
from speechgate.errors import SpeechgateError
from speechgate.metering.records import CLIENT_CLOSED
from speechgate.runtime import Runtime
from speechgate.serving import Call, Serving, SessionCall
from speechgate.speech_session import SpeechSession
from speechgate.wyoming import session as wy
from speechgate.wyoming.events import BadEvent, EventLimits, read_event
from speechgate.wyoming.info import describe

log = logging.getLogger(__name__)
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 1 << 20


@dataclass(frozen=True)
class ConnectionLimits:
    events: EventLimits
    idle_timeout: float
    """Seconds with nothing received or sent (and nothing to answer) before closing."""
    write_timeout: float
    """Seconds a write may wait for a client that reads nothing before the connection drops."""


class BadEventLog:
    """Bad events are the client's doing and cost nothing to send: one warning line per
    `interval`, counting the others, which go to debug (with their traceback). One per
    server."""

    def __init__(self, interval: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self._interval = interval
        self._clock = clock
        self._next = 0.0
        self._quiet = 0

    def __call__(self, message: str, *args: object, error: BaseException) -> None:
        now = self._clock()
        if now >= self._next:
            self._next = now + self._interval
            quiet, self._quiet = self._quiet, 0
            more = f" ({quiet} more since the last warning)" if quiet else ""
            log.warning(message + "%s", *args, more)
        else:
            self._quiet += 1
        log.debug(message, *args, exc_info=error)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise BadEvent("`text` must be a string.", param="text")
    return value


def _voice(voice: SynthesizeVoice | None) -> SynthesizeVoice | None:
    if voice is not None and not all(
        isinstance(part, str | None) for part in (voice.name, voice.language, voice.speaker)
    ):
        raise BadEvent("A voice's `name`, `language` and `speaker` must be strings.")
    return voice


class WyomingHandler:
    """Reading never waits on synthesis (it runs in a task), so a client leaving is noticed
    at once and its job cancelled in its worker. Event-loop only: nothing is thread-safe."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        runtime: Runtime,
        serving: Serving,
        limits: ConnectionLimits,
        bad_events: BadEventLog,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self._runtime = runtime
        self._serving = serving
        self._limits = limits
        self._bad_events = bad_events
        self._clock = clock
        self._last_active = clock()
        self._jobs: list[asyncio.Task[None]] = []
        self._stream: SpeechSession | None = None  # between synthesize-start and -stop
        self._stream_job: asyncio.Task[None] | None = None
        self._stream_refused = False  # its text was refused: the rest is dropped until -stop
        # What the stream was sent, as a digest: the whole text a streaming client sends too
        # is recognized without keeping the text.
        self._streamed = hashlib.sha256()
        self._just_streamed: bytes | None = None
        self._write_lock = asyncio.Lock()
        self.closed = asyncio.Event()

    @property
    def busy(self) -> bool:
        """Some request of this connection is still being answered (an open stream is not:
        it waits for its client's text)."""
        return any(job is not self._stream_job for job in self._jobs)

    def abort(self) -> None:
        """Drop the connection now: its loop ends, and its jobs are cancelled."""
        self.writer.transport.abort()

    async def run(self) -> None:
        """Answer events until the client leaves, is idle too long or sends a bad one."""
        try:
            while (event := await self._next_event()) is not None:
                self._last_active = self._clock()
                await self._handle(event)
        except BadEvent as error:
            self._bad_events(
                "Wyoming client %s sent a bad event: %s", self._peer, error.message, error=error
            )
            await self._send_error(error)
            await self._linger()
        except ConnectionError:
            pass
        except Exception as error:
            self._bad_events("Wyoming client %s: event failed: %r", self._peer, error, error=error)
        finally:
            await self.disconnect()

    async def _linger(self) -> None:
        """After a last answer, before closing: a socket closed with unread input is reset,
        and the reset can destroy the answer before the client reads it. So: no more output,
        and what the client still sends is read and dropped, for a bounded time and size."""
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            if self.writer.can_write_eof():
                self.writer.write_eof()
            async with asyncio.timeout(_LINGER_SECONDS):
                dropped = 0
                while dropped < _LINGER_BYTES and (data := await self.reader.read(65_536)):
                    dropped += len(data)

    @property
    def _host(self) -> str | None:
        peer = self.writer.get_extra_info("peername")
        return str(peer[0]) if isinstance(peer, tuple) else None

    @property
    def _peer(self) -> str:
        peer = self.writer.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    async def _next_event(self) -> Event | None:
        """The next event; None when the client left or has been idle too long."""
        read = asyncio.ensure_future(read_event(self.reader, self._limits.events))
        timeout = self._limits.idle_timeout
        try:
            while not read.done():
                remaining = self._last_active + timeout - self._clock()
                if remaining <= 0 and not self.busy:
                    log.debug("closing idle Wyoming connection from %s", self._peer)
                    return None
                await asyncio.wait({read}, timeout=remaining if remaining > 0 else timeout)
            return read.result()
        finally:
            if not read.done():
                read.cancel()

    async def write_event(self, event: Event) -> None:
        # Pong and info may be written while a job sends audio: one event at a time.
        async with self._write_lock:
            try:
                async with asyncio.timeout(self._limits.write_timeout):
                    await async_write_event(event, self.writer)
            except TimeoutError:
                # A client that reads nothing: abort, since closing would wait to flush.
                self.abort()
                raise ConnectionResetError("the Wyoming client stopped reading") from None
        self._last_active = self._clock()

    async def _handle(self, event: Event) -> None:
        try:
            await self._dispatch(event)
        except BadEvent as error:
            # Well framed but not what its type says (a missing text, a number for a name):
            # the next event is still readable, so the connection stays.
            self._bad_events(
                "Wyoming client %s sent a bad event: %s", self._peer, error.message, error=error
            )
            await self._send_error(error)

    async def _dispatch(self, event: Event) -> None:
        try:
            if Describe.is_type(event.type):
                await self.write_event(describe(self._runtime.catalog).event())
            elif Ping.is_type(event.type):
                await self.write_event(Pong(text=Ping.from_event(event).text).event())
            elif SynthesizeStart.is_type(event.type):
                await self._start_stream(_voice(SynthesizeStart.from_event(event).voice))
            elif SynthesizeChunk.is_type(event.type):
                await self._add_text(_text(SynthesizeChunk.from_event(event).text))
            elif SynthesizeStop.is_type(event.type):
                self._stop_stream()
            elif Synthesize.is_type(event.type):
                request = Synthesize.from_event(event)
                await self._whole_text(_text(request.text), _voice(request.voice))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise BadEvent(f"A {event.type!r} event is malformed ({error!r}).") from error

    async def _whole_text(self, text: str, voice: SynthesizeVoice | None) -> None:
        # A streaming client sends the whole text too, for servers that cannot stream (before
        # synthesize-stop; after it too, tolerated): this one speaks the chunks.
        digest = hashlib.sha256(text.encode(errors="replace")).digest()
        repeated, self._just_streamed = digest == self._just_streamed, None
        if self._stream is not None or self._stream_refused or repeated:
            return
        root = tracing.request(wy.CLIENT)
        try:
            with root.attached():
                caller = await wy.caller(self._runtime, self._serving.tenancy, self._host)
                request = wy.speech_request(self._runtime, caller, voice, text)
        except SpeechgateError as error:
            root.end(error.status_code)
            await self._send_error(error)
            return
        # Opened when its turn comes: the connection's syntheses are spoken one at a time.
        call = self._serving.call(wy.request_id())
        rate = request.sample_rate or 0
        self._queue(call, rate, wy.whole_text(call, request, caller), root)

    async def _start_stream(self, voice: SynthesizeVoice | None) -> None:
        self._stop_stream()  # a stream left open: what it has is spoken, and it ends
        self._streamed = hashlib.sha256()
        root = tracing.request(wy.CLIENT)
        tenancy = self._serving.tenancy
        try:
            with root.attached():
                caller = await wy.caller(self._runtime, tenancy, self._host)
                request = wy.speech_request(self._runtime, caller, voice)
                # Opened now, since its text comes before its turn does.
                call = self._serving.session(wy.request_id())
                try:
                    stream = await call.open(request, caller)
                except SpeechgateError as error:
                    call.finish(error.status_code)
                    raise
        except SpeechgateError as error:
            root.end(error.status_code)
            await self._send_error(error)
            self._stream_refused = True
            return
        self._stream = stream
        # Bounded as a WebSocket session is: its key re-checked by its id, at most so long.
        settings = self._runtime.settings
        guard = partial(call.guard, settings.sessions.check_interval, settings.sessions.max_seconds)
        rate = request.sample_rate or 0
        self._stream_job = self._queue(call, rate, stream.audio, root, stream=guard)

    async def _add_text(self, text: str) -> None:
        self._streamed.update(text.encode(errors="replace"))
        if self._stream is None:
            return  # no stream, or a refused one: nothing is kept
        try:
            self._stream.add_text(text)
        except SpeechgateError as error:
            # The stream ends here; the text that follows until synthesize-stop is dropped.
            self._abandon_stream()
            await self._send_error(error)

    def _stop_stream(self) -> None:
        if self._stream is not None:
            self._stream.finish()
        elif not self._stream_refused:
            return
        self._stream, self._stream_job, self._stream_refused = None, None, False
        self._just_streamed = self._streamed.digest()

    def _abandon_stream(self) -> None:
        if self._stream_job is not None:
            self._stream_job.cancel()
        self._stream, self._stream_job, self._stream_refused = None, None, True

    def _queue(
        self,
        call: Call | SessionCall,
        rate: int,
        audio: wy.Audio,
        root: tracing.RequestSpan,
        stream: wy.Guard | None = None,
    ) -> asyncio.Task[None]:
        """Run after the connection's previous job, so audio never interleaves; `root` is the
        synthesis's trace, ended with it. A `stream` (with its guard) ends with
        synthesize-stopped, or with an error that ends it."""
        previous = self._jobs[-1] if self._jobs else None

        async def run() -> None:
            with root.attached():
                try:
                    await speak()
                finally:
                    root.end(CLIENT_CLOSED)  # the status `speak` recorded, if it got that far

        async def speak() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            try:
                await wy.speak(call, rate, audio, self.write_event, stream)
                if stream is not None:
                    await self.write_event(SynthesizeStopped().event())
            except SpeechgateError as error:
                if self._stream_job is asyncio.current_task():
                    # Stopped (its key, its length, its quota): the text that follows until
                    # synthesize-stop is dropped, not kept for a stream no one speaks.
                    self._stream, self._stream_job, self._stream_refused = None, None, True
                await self._send_error(error)
            except ConnectionError:
                return  # the client left mid-audio; its usage is recorded as such
            except Exception as error:
                log.error("wyoming synthesis failed", exc_info=error)
                await self._send_error(SpeechgateError("The server had an error speaking this."))

        job = asyncio.create_task(run(), name="wyoming synthesis")
        self._jobs.append(job)
        job.add_done_callback(self._jobs.remove)
        return job

    async def _send_error(self, error: SpeechgateError) -> None:
        with contextlib.suppress(ConnectionError):
            await self.write_event(Error(text=error.message, code=error.code).event())

    async def disconnect(self) -> None:
        # The client is gone (or the server stops): its job stops in its worker too.
        jobs = list(self._jobs)
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        self._stream, self._stream_job = None, None
        self.writer.close()
        self.closed.set()
