"""One Wyoming synthesis, served through the one lifecycle (`speechgate.serving`) and sent
as audio events at the engine's rate: a `synthesize` is one `Call`, as an HTTP request is; a
`synthesize-start` ... `synthesize-stop` stream is a `SessionCall`, a job per segment as its
text arrives."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import NoReturn

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event
from wyoming.tts import SynthesizeVoice

from speechgate.audio.formats import parse_format
from speechgate.errors import SpeechgateError
from speechgate.metering.records import CLIENT_CLOSED
from speechgate.metering.tenancy import ANYONE, Caller, Tenancy
from speechgate.runtime import Runtime
from speechgate.serving import Call, SessionCall
from speechgate.session_guard import stopped_status, until_stopped
from speechgate.speech_request import SpeechRequest

# Wyoming has no keys: its usage is recorded under this client name (usage records' `model`
# says which engine, `request_id` starts with it), and under `wyoming_principal`'s key if set.
CLIENT = "wyoming"
_WIDTH = 2  # 16-bit samples
_FALLBACK_VOICE = "alloy"  # a generic name: the engine's voice for the language asked
_NO_KEY = ""
"""The owner that no stored voice has: who sees only the engines' own voices."""


async def caller(runtime: Runtime, tenancy: Tenancy, address: str | None = None) -> Caller:
    """Who a Wyoming connection from `address` acts for now: `wyoming_principal`'s key
    (AuthenticationFailed once it is revoked or expired), with its limits and stored voices;
    or no key, which sees no key's stored voices where keys are in use."""
    settings = runtime.settings
    if settings.wyoming.principal is not None:
        principal = await tenancy.key_principal(settings.wyoming.principal)
        return Caller.of(principal, address)
    return Caller(ANYONE, address, None if settings.auth.mode == "none" else _NO_KEY)


def speech_request(
    runtime: Runtime, caller: Caller, voice: SynthesizeVoice | None, text: str = ""
) -> SpeechRequest:
    """Raw 16-bit PCM at the engine's own rate (Wyoming clients resample themselves), with
    the engine whose voice `voice` names as the model (the protocol names none). `text`:
    a whole one; none for a stream's, which comes as it is written."""
    name = voice.name if voice is not None else None
    language = voice.language if voice is not None else None
    engine = runtime.service.engine_for_voice(name, caller.owner)
    return SpeechRequest(
        model=engine,
        voice=name or _FALLBACK_VOICE,
        format=parse_format("pcm"),
        text=text,
        sample_rate=runtime.catalog.engines[engine].sample_rate,
        language=language or None,
    )


Send = Callable[[Event], Awaitable[None]]
Guard = Callable[[], Awaitable[NoReturn]]
Audio = Callable[[], AsyncGenerator[bytes]]


def whole_text(call: Call, request: SpeechRequest, caller: Caller) -> Audio:
    """A text known whole at once, as one job through `call` (opened when its turn comes):
    its segments follow each other in one worker with no round trip to the gateway between
    them (a stream's are a job each)."""

    async def audio() -> AsyncGenerator[bytes]:
        answer = await call.open(request, caller)
        try:
            async for data in answer.body:
                yield data
        finally:
            await answer.aclose()

    return audio


async def speak(
    call: Call | SessionCall, rate: int, audio: Audio, send: Send, guard: Guard | None = None
) -> None:
    """Send the audio as it is made (audio-start, chunks, audio-stop) and finish the call
    however it ends. Errors the client should hear are raised for the caller to send,
    `guard`'s (`SessionCall.guard`) among them."""
    status = CLIENT_CLOSED
    try:
        sending = _send_audio(rate, audio, send)
        await (sending if guard is None else until_stopped(sending, guard()))
        status = 200
    except SpeechgateError as error:
        spoken = call.meter.stream
        status = stopped_status(error, spoken.audio_seconds if spoken is not None else 0.0)
        raise
    finally:
        call.finish(status)


async def _send_audio(rate: int, audio: Audio, send: Send) -> None:
    """audio-start, the chunks as they are made, audio-stop."""
    started = False
    async with contextlib.aclosing(audio()) as chunks:
        async for item in chunks:
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


def request_id() -> str:
    return f"{CLIENT}_{uuid.uuid4().hex}"
