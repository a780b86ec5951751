"""One Wyoming synthesis, sent as audio events at the engine's rate and metered like a
request: a `synthesize` is one job, as an HTTP request is (`WholeText`); a `synthesize-start`
... `synthesize-stop` stream is a `SpeechSession`, a job per segment as its text arrives."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Protocol

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.tts import SynthesizeVoice

from speechgate.audio.formats import parse_format
from speechgate.catalog import normalize
from speechgate.errors import InvalidRequest, SpeechgateError
from speechgate.metering.meter import Meter, Metered, finish
from speechgate.metering.records import CLIENT_CLOSED
from speechgate.metering.tenancy import ANYONE, Tenancy
from speechgate.runtime import Runtime
from speechgate.service import SpeechPlan, SpeechService, SpeechStream
from speechgate.speech import SpeechRequest
from speechgate.streaming_sessions import MAX_PENDING_CHARS

# Wyoming has no keys: its usage is recorded under this client name (usage records' `model`
# says which engine, `request_id` starts with it).
CLIENT = "wyoming"
_WIDTH = 2  # 16-bit samples
_FALLBACK_VOICE = "alloy"  # a generic name: the engine's voice for the language asked


def _engine_for(runtime: Runtime, voice: str | None) -> str:
    """The engine that has a voice of this name; the default engine for none (or for a name
    no engine knows, whose refusal then names that engine's voices)."""
    catalog = runtime.catalog
    if voice:
        wanted = normalize(voice)
        for engine in catalog.engines:
            if wanted in map(normalize, catalog.voice_names(engine)):
                return engine
        # Stored (cloned) voices are not in the catalog's names: the library resolves those.
        for engine in catalog.engines:
            if runtime.voices.resolve(catalog.engines[engine], voice, None):
                return engine
    default = runtime.settings.default_engine
    return default if default in catalog.engines else next(iter(catalog.engines))


def plan(runtime: Runtime, voice: SynthesizeVoice | None, text: str = "") -> SpeechPlan:
    """Raw 16-bit PCM at the engine's own rate: Wyoming clients resample themselves. `text`
    for a whole one; none for a stream's (its session is given it as it comes)."""
    name = voice.name if voice is not None else None
    language = voice.language if voice is not None else None
    engine = _engine_for(runtime, name)
    rate = runtime.catalog.engines[engine].sample_rate
    request = SpeechRequest(
        model=engine,
        voice=name or _FALLBACK_VOICE,
        format=parse_format("pcm"),
        text=text,
        sample_rate=rate,
        language=language or None,
    )
    return runtime.service.plan_options(request)


Send = Callable[[Event], Awaitable[None]]


class Utterance(Metered, Protocol):
    """What one synthesis says: its PCM, as it is made, and what the meter reads off it (a
    `SpeechSession` is one, for a stream)."""

    @property
    def characters(self) -> int: ...

    def audio(self) -> AsyncGenerator[bytes]: ...


class WholeText:
    """A text known whole at once: one job, whose segments follow each other in one worker
    with no round trip to the gateway between them (a session's are a job each)."""

    def __init__(self, service: SpeechService, plan: SpeechPlan) -> None:
        self._service = service
        self._plan = plan
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
        self._stream = await self._service.open(self._plan)
        async with contextlib.aclosing(self._stream.chunks()) as chunks:
            async for data in chunks:
                yield data


async def speak(
    tenancy: Tenancy,
    plan: SpeechPlan,
    utterance: Utterance,
    send: Send,
    meter: Meter,
) -> None:
    """Send the utterance's audio as it is made (audio-start, chunks, audio-stop); record its
    usage however it ends. Errors the client should hear are raised for the caller to send."""
    status = CLIENT_CLOSED
    meter.stream = utterance
    rate = plan.engine_rate
    started = False
    try:
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
        status = 200
    except SpeechgateError as error:
        status = error.status_code
        raise
    finally:
        meter.characters = utterance.characters
        finish(tenancy, meter, status)


def new_meter(plan: SpeechPlan) -> Meter:
    meter = Meter(f"{CLIENT}_{uuid.uuid4().hex}", time.perf_counter(), ANYONE)
    meter.model, meter.voice, meter.engine = plan.engine, plan.voice_id, plan.engine
    return meter


def check_text(text: str) -> None:
    """A whole text is spoken at once if it is no longer than a stream may hold unspoken."""
    if not text.strip():
        raise InvalidRequest("There is no text to speak.", param="text", code="empty_text")
    if len(text) > MAX_PENDING_CHARS:
        raise InvalidRequest(
            f"The text is {len(text)} characters long; the most is {MAX_PENDING_CHARS}.",
            param="text",
            code="string_above_max_length",
        )
