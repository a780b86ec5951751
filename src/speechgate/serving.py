"""The one way a speech request goes through the server, whichever front end it came in by.

A front end parses its wire format into a `SpeechRequest`, says who its `Caller` is, opens a
`Call` (one request) or a `SessionCall` (a streaming session's text, as it arrives) and frames
what comes back in its own shape. The call does the rest, in this order:

1. the caller's pronunciation dictionaries (a 404 for one that is not theirs);
2. model, voice and language resolved, a known voice pulled on first use, the input bound
   (`SpeechService.plan_or_pull`); a routed model's provider resolves its own;
3. the key's limits (`Tenancy.admit`: its models, rate, concurrency and quota);
4. routing, or the local plan: a routed model goes to the router, whose local provider comes
   back into `Serving.serve_locally`, the local part, without a second admission;
5. the pools' admission with the caller's place (`SpeechService.open`: the phrase cache, the
   predicted wait, a refused client's place kept for its retry), up to the first audio;
6. the stream, then the usage record and the key's limits freed (`finish`); the service keeps
   the metrics.

The client leaving is the front end's to notice: it passes `Waiting`, which races each wait
of the call against it (HTTP), or cancels the task that runs the call (WebSocket, Wyoming).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from functools import partial
from typing import NoReturn, Protocol, TypeVar

from speechgate.metering.meter import Meter, finish
from speechgate.metering.tenancy import ANYONE, Caller, Principal, Tenancy
from speechgate.routing.providers import Answer
from speechgate.routing.router import Router
from speechgate.service import SpeechPlan, SpeechService, SpeechStream
from speechgate.session_guard import check_key, guard_session
from speechgate.speech_request import SpeechRequest
from speechgate.speech_session import MAX_PENDING_CHARS, SpeechSession

T = TypeVar("T")

SSML_IGNORED_HEADER = "x-speechgate-ssml-ignored"
"""Names the SSML markup of the input that was not acted on (its text spoken plainly)."""

SseFraming = Callable[[SpeechStream, str], AsyncGenerator[bytes]]
"""Frames a stream as server-sent events (`(stream, text)`): the OpenAI front end's wire
format, which a request's `stream_format` may ask of any provider, this server's included."""


class Waiting(Protocol):
    """Awaits `work` on behalf of a caller who may leave first: then `work` is cancelled, a
    result that came at that moment is handed to `release`, and the front end's own error is
    raised."""

    def __call__(
        self, work: Awaitable[T], release: Callable[[T], Awaitable[object]] | None = None, /
    ) -> Awaitable[T]: ...


async def _as_is(work: Awaitable[T], release: Callable[[T], Awaitable[object]] | None = None) -> T:
    return await work


class Serving:
    """What every front end serves speech through. Use from one event loop."""

    def __init__(
        self,
        service: SpeechService,
        tenancy: Tenancy,
        sse: SseFraming,
        router: Router | None = None,
        max_pending_chars: int = MAX_PENDING_CHARS,
    ) -> None:
        """`sse`: how this server's audio is framed for `stream_format: "sse"`; `router`:
        where routed models go (set after, when its local provider is handed this object's
        `serve_locally`); `max_pending_chars`: a streaming session's text not yet spoken, at
        most (the server's input bound, `max_input_chars`, as a request's whole text)."""
        self.service = service
        self.tenancy = tenancy
        self.router = router
        self.max_pending_chars = max_pending_chars
        self._sse = sse

    def call(self, request_id: str) -> Call:
        """A call for one request, metered from now."""
        return Call(self, Meter(request_id, time.perf_counter()))

    def session(self, request_id: str) -> SessionCall:
        """A call for one streaming session."""
        return SessionCall(self, Meter(request_id, time.perf_counter()))

    async def serve_locally(
        self, request: SpeechRequest, caller: Caller, waiting: Waiting = _as_is
    ) -> Answer:
        """The local part of a call, for a caller admitted before routing (the router's local
        provider hands its requests here): planned, a voice pulled on first use, opened with
        the caller's place, and answered with this server's headers."""
        plan = await waiting(self.service.plan_or_pull(request, caller.owner))
        return await self.open_plan(plan, caller, waiting)

    async def open_plan(
        self, plan: SpeechPlan, caller: Caller, waiting: Waiting = _as_is
    ) -> Answer:
        """A planned request of an admitted caller's, up to its first audio."""
        stream = await waiting(
            self.service.open(plan, caller.sender, caller.share), SpeechStream.aclose
        )
        return self._answer(plan, stream)

    def _answer(self, plan: SpeechPlan, stream: SpeechStream) -> Answer:
        """The answer to a request this server's engines serve."""
        ttfa_ms = stream.time_to_first_audio * 1000
        headers = {
            "x-speechgate-time-to-first-audio-ms": f"{ttfa_ms:.1f}",
            "x-speechgate-engine": plan.engine,
            "server-timing": f"ttfa;dur={ttfa_ms:.2f}",
        }
        if stream.engine_time_to_first_audio is not None:
            # W3C Server-Timing: what of the time to first audio the engine itself took; the
            # rest is waiting for a worker and carrying the audio back.
            engine_ms = stream.engine_time_to_first_audio * 1000
            headers["server-timing"] += f", engine;dur={engine_ms:.2f}"
        rtf = self.service.real_time_factor(plan.engine)
        if rtf is not None:
            headers["x-speechgate-real-time-factor"] = f"{rtf:.2f}"
        if plan.voice_id:
            # Which voice spoke: a generic name or `language` may have chosen it.
            headers["x-speechgate-voice"] = plan.voice_id
        if plan.instructions_ignored:
            headers["x-speechgate-instructions"] = "ignored"
        if plan.ssml_ignored:
            # A header is Latin-1; an unknown element's name may not be.
            named = ", ".join(plan.ssml_ignored).encode("ascii", "backslashreplace").decode()
            headers[SSML_IGNORED_HEADER] = named
        if stream.cache is not None:
            headers["x-speechgate-cache"] = stream.cache
        if plan.stream_format == "sse":
            body, media_type = self._sse(stream, plan.request.text), "text/event-stream"
        else:
            body, media_type = stream.chunks(), plan.output.format.content_type
        words = stream.words if plan.output.word_times else None
        return Answer(
            media_type,
            body,
            stream,
            headers,
            on_close=stream.aclose,
            words=words,
            engine=plan.engine,
        )


class Call:
    """One speech request, from its caller to its usage record: `open` it, frame its answer,
    and `finish` it with the status its client saw, however it ended (also when `open`
    raised: a refused request is recorded too)."""

    def __init__(self, serving: Serving, meter: Meter) -> None:
        self._serving = serving
        self.meter = meter
        """What is known of the request so far; the usage record is made of it."""

    async def open(
        self,
        request: SpeechRequest,
        caller: Caller,
        waiting: Waiting = _as_is,
        sticky: str | None = None,
    ) -> Answer:
        """Serve `request` for `caller`; returns once its first audio exists (errors up to
        then are raised: the front end can still answer with one). `sticky`: what picks the
        same provider for a retry of a routed request (the request's id by default)."""
        serving, meter = self._serving, self.meter
        service = serving.service
        meter.principal = caller.principal
        meter.model, meter.voice = request.model, request.voice
        meter.characters = len(request.text)
        # Before admission: a request naming a dictionary that is not its key's costs nothing
        # of the key's limits. Planning finds them again, cached.
        if request.dictionaries:
            await service.named_dictionaries(request, caller.owner)
        router = serving.router
        if router is not None and router.serves(request.model):
            await self._admit(caller)
            answer = await waiting(
                router.open(
                    request,
                    sticky or meter.request_id,
                    meter.request_id,
                    on_attempt=lambda name: setattr(meter, "provider", name),
                    caller=caller,
                ),
                Answer.aclose,
            )
        else:
            # A voice pulled on first use is part of the wait the client may leave.
            plan = await waiting(service.plan_or_pull(request, caller.owner))
            meter.engine = plan.engine
            await self._admit(caller)
            answer = await serving.open_plan(plan, caller, waiting)
        meter.engine = answer.engine
        meter.stream = answer.progress
        return answer

    async def admit(self, caller: Caller, model: str, voice: str, engine: str) -> None:
        """Apply `caller`'s limits to a metered request that is no speech (a voice cloned: it
        takes a worker); raises the refusal if it may not run now."""
        meter = self.meter
        meter.principal = caller.principal
        meter.model, meter.voice, meter.engine, meter.characters = model, voice, engine, 0
        await self._admit(caller)

    async def _admit(self, caller: Caller) -> None:
        meter = self.meter
        admission = await self._serving.tenancy.admit(
            caller.principal, meter.model, meter.characters
        )
        meter.admission = admission
        meter.headers = admission.headers

    def finish(self, status: int) -> None:
        """Free the key's limits and record the usage, with the status the client saw (499
        for a client that left)."""
        finish(self._serving.tenancy, self.meter, status)


class SessionCall:
    """A streaming session as one call: planned before its text comes, admitted once against
    the key's limits, each segment's characters counted against its quota as it is spoken,
    and metered once with all of them. Its segments are jobs of their own, fairly shared by
    the caller's key or address."""

    def __init__(self, serving: Serving, meter: Meter) -> None:
        self._serving = serving
        self.meter = meter
        self.session: SpeechSession | None = None

    async def open(
        self,
        request: SpeechRequest,
        caller: Caller,
        max_pending_chars: int | None = None,
    ) -> SpeechSession:
        """The session `request` (with no text) describes, admitted: feed it text and iterate
        its `speak()`. `max_pending_chars`: its text not yet spoken, at most (by default
        `Serving.max_pending_chars`)."""
        serving, meter = self._serving, self.meter
        service, tenancy = serving.service, serving.tenancy
        meter.principal = caller.principal
        meter.model, meter.voice = request.model, request.voice
        plan = await service.plan_options_or_pull(request, caller.owner)
        meter.engine = plan.engine
        # No text yet: the characters are reserved segment by segment.
        admission = meter.admission = await tenancy.admit(caller.principal, request.model, 0)
        meter.headers = admission.headers

        async def reserve(characters: int) -> None:
            await tenancy.reserve(admission, characters)

        self.session = meter.stream = SpeechSession(
            service,
            plan,
            max_pending_chars or serving.max_pending_chars,
            before_segment=reserve,
            sender=caller.share,
        )
        return self.session

    async def guard(
        self,
        interval: float,
        max_seconds: float,
        lookup: Callable[[], Awaitable[Principal]] | None = None,
    ) -> NoReturn:
        """The session's bounds while it runs (`session_guard`): its key re-checked every
        `interval` seconds (revoked, expired, or no longer allowed the model: it stops) and at
        most `max_seconds` of it. `lookup`: who the session's credentials name now; None: the
        key looked up again by its id. Ends only by raising."""
        principal = self.meter.principal or ANYONE
        key_id = principal.key_id
        check: Callable[[], Awaitable[None]] = _nothing_to_check
        if key_id is not None:
            lookup = lookup or partial(self._serving.tenancy.key_principal, key_id)
            check = partial(check_key, lookup, principal, self.meter.model)
        await guard_session(check, interval, max_seconds)

    def finish(self, status: int) -> None:
        """Record the session's usage: the characters it had spoken (reserved against the
        key's quota), with the status it ended with."""
        meter = self.meter
        if meter.admission is not None:
            meter.characters = meter.admission.characters
        finish(self._serving.tenancy, meter, status)


async def _nothing_to_check() -> None:
    """A session without a key: nothing to take back, only its length is bounded."""
