"""One Wyoming synthesis, sent as audio events at the engine's rate and metered like a
request: a `synthesize` is one job, as an HTTP request is (`WholeText`); a `synthesize-start`
... `synthesize-stop` stream is a `SpeechSession`, a job per segment as its text arrives."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable
from dataclasses import dataclass
from functools import partial
from typing import NoReturn, Protocol

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.tts import SynthesizeVoice

from speechgate.audio.formats import parse_format
from speechgate.catalog import normalize
from speechgate.errors import SpeechgateError, VoiceNotInstalled
from speechgate.metering.meter import Meter, Metered, finish
from speechgate.metering.records import CLIENT_CLOSED
from speechgate.metering.tenancy import ANYONE, Principal, Tenancy
from speechgate.runtime import Runtime
from speechgate.service import SpeechPlan, SpeechService, SpeechStream
from speechgate.session_guard import check_key, guard_session, stopped_status, until_stopped
from speechgate.speech_request import SpeechRequest

# Wyoming has no keys: its usage is recorded under this client name (usage records' `model`
# says which engine, `request_id` starts with it), and under `wyoming_principal`'s key if set.
CLIENT = "wyoming"
_WIDTH = 2  # 16-bit samples
_FALLBACK_VOICE = "alloy"  # a generic name: the engine's voice for the language asked
_NO_KEY = ""
"""The owner that no stored voice has: who sees only the engines' own voices."""


@dataclass(frozen=True)
class Caller:
    """Who a Wyoming connection acts for: `principal` for the key's limits and usage, `owner`
    for the stored voices it may name (None: every one)."""

    principal: Principal
    owner: str | None


async def caller(runtime: Runtime, tenancy: Tenancy) -> Caller:
    """The connection's caller now: `wyoming_principal`'s key (AuthenticationFailed once it
    is revoked or expired), or no key, which sees no key's stored voices where keys are in use."""
    settings = runtime.settings
    if settings.wyoming.principal is not None:
        principal = await tenancy.key_principal(settings.wyoming.principal)
        return Caller(principal, principal.key_id)
    return Caller(ANYONE, None if settings.auth.mode == "none" else _NO_KEY)


def _engine_for(runtime: Runtime, voice: str | None, owner: str | None) -> str:
    """The engine that has a voice of this name (or knows it, to pull); the default engine for
    none (or for a name no engine knows, whose refusal then names that engine's voices)."""
    catalog = runtime.catalog
    default = runtime.settings.default_engine
    default = default if default in catalog.engines else next(iter(catalog.engines))
    if not voice:
        return default
    stored = runtime.voices.library.find(voice, owner)
    if stored is not None and stored.engine in catalog.engines:
        return stored.engine
    wanted = normalize(voice)
    for engine in catalog.engines:
        if wanted in map(normalize, catalog.voice_names(engine)):
            return engine
    # A name an engine knows without having it installed: the engine whose plan pulls it.
    for engine in [default, *(name for name in catalog.engines if name != default)]:
        try:
            catalog.voice(engine, voice)
        except VoiceNotInstalled:
            return engine
        except SpeechgateError:
            continue
    return default


async def plan(
    runtime: Runtime, caller: Caller, voice: SynthesizeVoice | None, text: str | None = None
) -> SpeechPlan:
    """Raw 16-bit PCM at the engine's own rate: Wyoming clients resample themselves. `text`
    for a whole one (checked as an HTTP request's `input` is); none for a stream's (its
    session is given it as it comes). A voice known but not installed is pulled first, where
    the server pulls."""
    name = voice.name if voice is not None else None
    language = voice.language if voice is not None else None
    engine = _engine_for(runtime, name, caller.owner)
    rate = runtime.catalog.engines[engine].sample_rate
    request = SpeechRequest(
        model=engine,
        voice=name or _FALLBACK_VOICE,
        format=parse_format("pcm"),
        text=text or "",
        sample_rate=rate,
        language=language or None,
    )
    service = runtime.service
    if text is None:
        return await service.plan_options_or_pull(request, caller.owner)
    return await service.plan_or_pull(request, caller.owner)


Send = Callable[[Event], Awaitable[None]]
Guard = Callable[[], Awaitable[NoReturn]]


class Utterance(Metered, Protocol):
    """What one synthesis says: its PCM, as it is made, and what the meter reads off it (a
    `SpeechSession` is one, for a stream)."""

    @property
    def characters(self) -> int: ...

    def audio(self) -> AsyncGenerator[bytes]: ...


class WholeText:
    """A text known whole at once: one job, whose segments follow each other in one worker
    with no round trip to the gateway between them (a session's are a job each)."""

    def __init__(
        self, service: SpeechService, plan: SpeechPlan, caller: Caller, address: str | None
    ) -> None:
        """`address`: the client's host, whose share of the workers a caller with no key has
        (as an HTTP client without a key has)."""
        self._service = service
        self._plan = plan
        key_id = caller.principal.key_id
        self._sender = (key_id, address)
        self._principal: Hashable = key_id if key_id is not None else ("address", address)
        self._stream: SpeechStream | None = None

    @property
    def characters(self) -> int:
        return self._plan.characters

    @property
    def audio_seconds(self) -> float:
        return self._stream.audio_seconds if self._stream else 0.0

    @property
    def time_to_first_audio(self) -> float | None:
        return self._stream.time_to_first_audio if self._stream else None

    @property
    def completed(self) -> bool:
        return self._stream is not None and self._stream.completed

    async def audio(self) -> AsyncGenerator[bytes]:
        self._stream = await self._service.open(self._plan, self._sender, self._principal)
        async with contextlib.aclosing(self._stream.chunks()) as chunks:
            async for data in chunks:
                yield data


def stream_guard(runtime: Runtime, tenancy: Tenancy, caller: Caller, model: str) -> Guard:
    """A stream's bounds, as a WebSocket session's: the key it acts for re-checked every
    `session_check_interval` (revoked, expired or denied `model`: it stops), and at most
    `max_session_seconds` of it."""
    settings = runtime.settings
    principal = caller.principal
    key_id = principal.key_id
    check = (
        partial(check_key, partial(tenancy.key_principal, key_id), principal, model)
        if key_id is not None
        else _nothing_to_check
    )
    return partial(
        guard_session, check, settings.sessions.check_interval, settings.sessions.max_seconds
    )


async def _nothing_to_check() -> None:
    return None


async def speak(
    tenancy: Tenancy,
    plan: SpeechPlan,
    utterance: Utterance,
    send: Send,
    meter: Meter,
    admitted_characters: int,
    guard: Guard | None = None,
) -> None:
    """Admit the request against the caller's limits with `admitted_characters` (a stream's
    are reserved segment by segment, as they are spoken), send the utterance's audio as it is
    made (audio-start, chunks, audio-stop); record its usage however it ends. Errors the
    client should hear are raised for the caller to send, `guard`'s (`stream_guard`, running
    from the admission on) among them."""
    status = CLIENT_CLOSED
    meter.stream = utterance
    try:
        principal = meter.principal or ANYONE
        meter.admission = await tenancy.admit(principal, meter.model, admitted_characters)
        sending = _send_audio(plan, utterance, send)
        await (sending if guard is None else until_stopped(sending, guard()))
        status = 200
    except SpeechgateError as error:
        status = stopped_status(error, utterance.audio_seconds)
        raise
    finally:
        meter.characters = utterance.characters
        finish(tenancy, meter, status)


async def _send_audio(plan: SpeechPlan, utterance: Utterance, send: Send) -> None:
    """audio-start, the utterance's chunks as they are made, audio-stop."""
    rate = plan.engine_rate
    started = False
    async with contextlib.aclosing(utterance.audio()) as audio:
        async for item in audio:
            if not item:
                continue
            if not started:
                await send(AudioStart(rate=rate, width=_WIDTH, channels=1).event())
                started = True
            await send(AudioChunk(rate=rate, width=_WIDTH, channels=1, audio=item).event())
    if not started:
        # Text with nothing to say (punctuation only): still a well-formed, empty answer.
        await send(AudioStart(rate=rate, width=_WIDTH, channels=1).event())
    await send(AudioStop().event())


def reserving(tenancy: Tenancy, meter: Meter) -> Callable[[int], Awaitable[None]]:
    """A stream's `before_segment`: counts a segment's characters against the key's quota,
    under the admission `speak` made."""

    async def reserve(characters: int) -> None:
        if meter.admission is not None:
            await tenancy.reserve(meter.admission, characters)

    return reserve


def new_meter(plan: SpeechPlan, principal: Principal) -> Meter:
    meter = Meter(f"{CLIENT}_{uuid.uuid4().hex}", time.perf_counter(), principal)
    meter.model, meter.voice, meter.engine = plan.engine, plan.voice_id, plan.engine
    return meter
