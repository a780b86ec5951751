"""`POST /v1/audio/speech`: validate, admit, wait for first audio, then stream."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import TypeVar

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from speechgate.api.access import admit_speech
from speechgate.api.error_handlers import error_body
from speechgate.api.schemas import (
    CreateSpeechRequest,
    ErrorDetail,
    SpeechAudioDelta,
    SpeechAudioDone,
    SpeechAudioWords,
    SpeechEvent,
    SpeechStreamError,
    SpeechUsage,
    SpeechWord,
    error_responses,
    sse_event_schema,
)
from speechgate.api.state import app_state
from speechgate.audio.formats import AudioFormat
from speechgate.errors import InvalidRequest, SpeechgateError, UnsupportedMediaType
from speechgate.metering.meter import Meter
from speechgate.routing.providers import Answer
from speechgate.service import SpeechPlan, SpeechService, SpeechStream
from speechgate.speech_request import SpeechRequest

router = APIRouter()
SSML_IGNORED_HEADER = "x-speechgate-ssml-ignored"
"""Names the SSML markup of the input that was not acted on (its text spoken plainly)."""
T = TypeVar("T")

# Roughly OpenAI's audio token rate; speechgate's usage counts characters in and 20 ms
# frames of speech out, so the numbers scale like OpenAI's without pretending to be tokens.
_FRAMES_PER_SECOND = 50


class ClientGone(Exception):
    """The client disconnected before the response started."""


async def require_json(request: Request) -> None:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json" and not content_type.endswith("+json"):
        raise UnsupportedMediaType(
            f"Content-Type must be application/json, not {content_type or 'missing'!r}."
        )


async def _disconnected(request: Request) -> None:
    # The body has been read, so the next message the server has for us is the disconnect.
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(
    request: Request, work: Awaitable[T], release: Callable[[T], Awaitable[object]] | None = None
) -> T:
    """Run `work`, cancelling it (and so leaving the queue or aborting the job) if the client
    leaves first: nobody would hear the result. Cancelled itself, it cancels `work` too, and
    hands a result that came at that moment to `release`."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        await _abandon(task, release)
        raise
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    await _abandon(task, release)
    raise ClientGone


async def _abandon(
    task: asyncio.Future[T], release: Callable[[T], Awaitable[object]] | None
) -> None:
    task.cancel()
    # Shielded: a cancelled request must still wait for its work to let go of what it holds.
    with anyio.CancelScope(shield=True):
        await asyncio.gather(task, return_exceptions=True)
        if release is not None and not task.cancelled() and task.exception() is None:
            await release(task.result())


AUDIO_CONTENT = {
    fmt.content_type: {"schema": {"type": "string", "format": "binary"}} for fmt in AudioFormat
}
_SSE_CONTENT = {"text/event-stream": {"schema": sse_event_schema()}}


@router.post(
    "/v1/audio/speech",
    summary="Generate audio from text (OpenAI-compatible)",
    response_class=StreamingResponse,
    responses={
        200: {"description": "The audio, streamed.", "content": AUDIO_CONTENT | _SSE_CONTENT},
        **error_responses(400, 401, 403, 404, 413, 415, 429, 500, 503),
    },
    dependencies=[Depends(require_json)],
)
async def create_speech(
    body: CreateSpeechRequest,
    request: Request,
) -> Response:
    if body.timestamp_granularities and body.stream_format != "sse":
        raise InvalidRequest(
            'Word timestamps are sent as events: ask for them with `stream_format: "sse"`.',
            param="timestamp_granularities",
        )
    speech = body.to_speech(body.input, body.stream_format)
    await check_dictionaries(request, speech)
    meter = await admit_speech(request, body.model, body.voice_name, len(body.input))
    return await respond(request, speech, meter, body.user)


async def check_dictionaries(request: Request, speech: SpeechRequest) -> None:
    """Refuse a request naming a pronunciation dictionary that is not its key's before it is
    admitted (it costs nothing of the key's limits); planning finds them again, cached."""
    if speech.dictionaries:
        service = app_state(request).service
        await service.named_dictionaries(speech, request.state.principal.key_id)


async def respond(
    request: Request,
    speech: SpeechRequest,
    meter: Meter,
    user: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """Serve an admitted request, whichever front end translated it: through the router if a
    route serves its model, else this server's engines. Returns once the first audio exists;
    `headers` are added to the answer's own."""
    answer = await open_answer(request, speech, meter, user)
    if answer is None:
        # Nobody is listening; 499 (nginx's "client closed request") only reaches the logs.
        return Response(status_code=499)
    answer.headers.update(headers or {})
    # Headers go out now: a later error can only cut the body short, which clients see as
    # an incomplete chunked response (SSE gets an error event instead).
    return AnswerResponse(answer)


async def open_answer(
    request: Request, speech: SpeechRequest, meter: Meter, user: str | None = None
) -> Answer | None:
    """`respond`'s answer, for a front end that frames the body itself; None if the client
    left first. Metering reads the answer's progress when the response ends."""
    # Looked up here rather than as a dependency: FastAPI's dependency machinery costs tens
    # of microseconds each, on the way to every first audio byte.
    state = app_state(request)
    service, routing = state.service, state.router
    try:
        if routing is not None and routing.serves(speech.model):
            # Sticky: a retry with the same x-request-id (or the same user) picks the same
            # provider.
            key = request.headers.get("x-request-id") or user or request.state.request_id
            answer = await unless_disconnected(
                request,
                routing.open(
                    speech,
                    key,
                    request.state.request_id,
                    on_attempt=lambda name: setattr(meter, "provider", name),
                    owner=request.state.principal.key_id,
                ),
                Answer.aclose,
            )
            meter.engine = answer.headers.get("x-speechgate-engine", "")
        else:
            # A voice pulled on first use (auto_pull) is part of the wait the client may leave.
            plan = await unless_disconnected(
                request, service.plan_or_pull(speech, request.state.principal.key_id)
            )
            meter.engine = plan.engine
            # What a client keeps across a retry: its key and its address.
            key_id = request.state.principal.key_id
            address = request.client.host if request.client else None
            # Whom the workers are shared fairly between: a key, or else an address.
            principal = key_id if key_id is not None else ("address", address)
            stream = await unless_disconnected(
                request, service.open(plan, (key_id, address), principal), SpeechStream.aclose
            )
            answer = local_answer(service, plan, stream)
    except ClientGone:
        return None
    meter.stream = answer.progress
    return answer


async def serve_locally(
    service: SpeechService, request: SpeechRequest, owner: str | None
) -> Answer:
    """A routed request this server's engines serve (the router's `LocalProvider`): planned,
    a voice pulled on first use, opened, and answered as `local_answer` frames it."""
    plan = await service.plan_or_pull(request, owner)
    return local_answer(service, plan, await service.open(plan))


def local_answer(service: SpeechService, plan: SpeechPlan, stream: SpeechStream) -> Answer:
    """The response to a request this server's engines serve."""
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
    rtf = service.real_time_factor(plan.engine)
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
        body, media_type = _sse(stream, plan.request.text), "text/event-stream"
    else:
        body, media_type = stream.chunks(), plan.output.format.content_type
    words = stream.words if plan.output.word_times else None
    return Answer(media_type, body, stream, headers, on_close=stream.aclose, words=words)


def _event(event: SpeechEvent) -> bytes:
    return f"data: {event.model_dump_json()}\n\n".encode()


async def _sse(stream: SpeechStream, text: str) -> AsyncGenerator[bytes]:
    """The stream as events. Word times (if asked for) go before the delta of the chunk that
    completes them, so a word is never late for its audio (times in the decoded stream: the
    pipeline counts a codec's priming)."""
    characters = len(text)
    try:
        async for chunk in stream.encoded():
            if chunk.words:
                words = [SpeechWord.of(word, text) for word in chunk.words]
                yield _event(SpeechAudioWords(words=words))
            if chunk.data:
                yield _event(SpeechAudioDelta(audio=base64.b64encode(chunk.data).decode()))
    except SpeechgateError as error:
        yield _event(SpeechStreamError(error=ErrorDetail(**error_body(error)["error"])))
        return
    frames = round(stream.audio_seconds * _FRAMES_PER_SECOND)
    yield _event(
        SpeechAudioDone(
            usage=SpeechUsage(
                input_tokens=characters, output_tokens=frames, total_tokens=characters + frames
            )
        )
    )


class AnswerResponse(StreamingResponse):
    """An answer's body, streamed; however the response ends, the answer ends with it, once.

    Starlette never iterates the body of a response cut before its first body message (the
    client gone while the headers go out, or the task cancelled), and a body generator never
    started runs no `finally`. The close here is what then ends the job and frees the router's
    in-flight count and the breaker's probe slot.
    """

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.body, media_type=answer.media_type, headers=answer.headers)
        self.answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Shielded: a cancelled response must still end its job and bookkeeping.
            with anyio.CancelScope(shield=True):
                await self.answer.aclose()
