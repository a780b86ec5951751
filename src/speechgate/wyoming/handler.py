"""One Wyoming connection: answers its events, runs its syntheses one after another."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.server import AsyncEventHandler
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from speechgate.errors import SpeechgateError
from speechgate.metering.tenancy import Tenancy
from speechgate.runtime import Runtime
from speechgate.service import SpeechPlan
from speechgate.streaming_sessions import SpeechSession
from speechgate.wyoming import session as wy
from speechgate.wyoming.info import describe

log = logging.getLogger(__name__)


class WyomingHandler(AsyncEventHandler):
    """Reading never waits on synthesis (it runs in a task), so a client leaving is noticed
    at once and its job cancelled in its worker."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        runtime: Runtime,
        tenancy: Tenancy,
    ) -> None:
        super().__init__(reader, writer)
        self._runtime = runtime
        self._tenancy = tenancy
        self._jobs: list[asyncio.Task[None]] = []
        self._stream: SpeechSession | None = None  # between synthesize-start and -stop
        self._streamed: list[str] = []  # its text so far
        self._just_streamed: str | None = None
        self._write_lock = asyncio.Lock()
        self.closed = asyncio.Event()

    async def write_event(self, event: Event) -> None:
        # Pong and info may be written while a job sends audio: one event at a time.
        async with self._write_lock:
            await super().write_event(event)

    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(describe(self._runtime.catalog).event())
        elif Ping.is_type(event.type):
            await self.write_event(Pong(text=Ping.from_event(event).text).event())
        elif SynthesizeStart.is_type(event.type):
            await self._start_stream(SynthesizeStart.from_event(event))
        elif SynthesizeChunk.is_type(event.type):
            if self._stream is not None:
                text = SynthesizeChunk.from_event(event).text
                self._streamed.append(text)
                try:
                    self._stream.add_text(text)
                except SpeechgateError as error:
                    await self._send_error(error)
        elif SynthesizeStop.is_type(event.type):
            if self._stream is not None:
                self._stream.finish()
                self._stream = None
                self._just_streamed = "".join(self._streamed)
        elif Synthesize.is_type(event.type):
            # A streaming client sends the whole text too, for servers that cannot stream
            # (before synthesize-stop; after it too, tolerated): this one speaks the chunks.
            request = Synthesize.from_event(event)
            repeated, self._just_streamed = request.text == self._just_streamed, None
            if self._stream is None and not repeated:
                await self._synthesize(request)
        return True

    async def _synthesize(self, request: Synthesize) -> None:
        try:
            wy.check_text(request.text)
            plan = wy.plan(self._runtime, request.voice, request.text)
        except SpeechgateError as error:
            await self._send_error(error)
            return
        self._queue(plan, wy.WholeText(self._runtime.service, plan), stopped=False)

    async def _start_stream(self, start: SynthesizeStart) -> None:
        try:
            plan = wy.plan(self._runtime, start.voice)
        except SpeechgateError as error:
            await self._send_error(error)
            return
        self._stream = SpeechSession(self._runtime.service, plan)
        self._streamed = []
        self._queue(plan, self._stream, stopped=True)

    def _queue(self, plan: SpeechPlan, utterance: wy.Utterance, stopped: bool) -> None:
        """Run after the connection's previous job, so audio never interleaves."""
        previous = self._jobs[-1] if self._jobs else None

        async def run() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            try:
                meter = wy.new_meter(plan)
                await wy.speak(self._tenancy, plan, utterance, self.write_event, meter)
                if stopped:
                    await self.write_event(SynthesizeStopped().event())
            except SpeechgateError as error:
                await self._send_error(error)
            except ConnectionError:
                return  # the client left mid-audio; its usage is recorded as such
            except Exception as error:
                log.error("wyoming synthesis failed", exc_info=error)
                await self._send_error(SpeechgateError("The server had an error speaking this."))

        job = asyncio.create_task(run(), name="wyoming synthesis")
        self._jobs.append(job)
        job.add_done_callback(self._jobs.remove)

    async def _send_error(self, error: SpeechgateError) -> None:
        with contextlib.suppress(ConnectionError):
            await self.write_event(Error(text=error.message, code=error.code).event())

    async def disconnect(self) -> None:
        # The client is gone (or the server stops): its job stops in its worker too.
        jobs = list(self._jobs)
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
        self.closed.set()
