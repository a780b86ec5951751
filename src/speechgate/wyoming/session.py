"""One Wyoming synthesis (a `synthesize`, or a `synthesize-start` ... `synthesize-stop`
stream): a `SpeechSession` at the engine's rate, sent as audio events, metered like a request."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.tts import SynthesizeVoice

from speechgate.audio.formats import parse_format
from speechgate.catalog import normalize
from speechgate.errors import InvalidRequest, SpeechgateError
from speechgate.metering.meter import Meter, finish
from speechgate.metering.records import CLIENT_CLOSED
from speechgate.metering.tenancy import ANYONE, Tenancy
from speechgate.runtime import Runtime
from speechgate.service import SpeechPlan
from speechgate.speech import SpeechRequest
from speechgate.streaming_sessions import SpeechSession

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


def plan(runtime: Runtime, voice: SynthesizeVoice | None) -> SpeechPlan:
    """Raw 16-bit PCM at the engine's own rate: Wyoming clients resample themselves."""
    name = voice.name if voice is not None else None
    language = voice.language if voice is not None else None
    engine = _engine_for(runtime, name)
    rate = runtime.catalog.engines[engine].sample_rate
    request = SpeechRequest(
        model=engine,
        voice=name or _FALLBACK_VOICE,
        format=parse_format("pcm"),
        sample_rate=rate,
        language=language or None,
    )
    return runtime.service.plan_options(request)


Send = Callable[[Event], Awaitable[None]]


async def speak(
    tenancy: Tenancy,
    plan: SpeechPlan,
    session: SpeechSession,
    send: Send,
    meter: Meter,
) -> None:
    """Send the session's audio as it is made (audio-start, chunks, audio-stop); record its
    usage however it ends. Errors the client should hear are raised for the caller to send."""
    status = CLIENT_CLOSED
    meter.stream = session
    rate = plan.engine_rate
    started = False
    try:
        async for item in session.speak():
            if not isinstance(item, bytes) or not item:
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
        meter.characters = session.characters
        finish(tenancy, meter, status)


def new_meter(plan: SpeechPlan) -> Meter:
    meter = Meter(f"{CLIENT}_{uuid.uuid4().hex}", time.perf_counter(), ANYONE)
    meter.model, meter.voice, meter.engine = plan.engine, plan.voice_id, plan.engine
    return meter


def check_text(text: str) -> None:
    if not text.strip():
        raise InvalidRequest("There is no text to speak.", param="text", code="empty_text")
