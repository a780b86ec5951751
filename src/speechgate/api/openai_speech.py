"""`POST /v1/audio/speech`: OpenAI's body in, served through the one lifecycle, the audio
out as bytes or as server-sent events."""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse

from speechgate.api.error_handlers import error_body
from speechgate.api.http import AUDIO_CONTENT, require_json, respond
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
from speechgate.errors import InvalidRequest, SpeechgateError
from speechgate.service import SpeechStream

router = APIRouter()

# Roughly OpenAI's audio token rate; speechgate's usage counts characters in and 20 ms
# frames of speech out, so the numbers scale like OpenAI's without pretending to be tokens.
_FRAMES_PER_SECOND = 50

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
    return await respond(request, speech, body.user)


def _event(event: SpeechEvent) -> bytes:
    return f"data: {event.model_dump_json()}\n\n".encode()


async def sse_events(stream: SpeechStream, text: str) -> AsyncGenerator[bytes]:
    """The stream as OpenAI's server-sent events (`Serving`'s framing for `stream_format:
    "sse"`, whichever front end or provider asked). Word times (if asked for) go before the
    delta of the chunk that completes them, so a word is never late for its audio (times in
    the decoded stream: the pipeline counts a codec's priming)."""
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
