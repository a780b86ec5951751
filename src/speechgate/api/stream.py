"""`WS /v1/audio/speech/stream`: speak text while it is being written (docs/websocket.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from functools import partial
from typing import Annotated, Literal

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from speechgate import tracing
from speechgate.api.access import credentials, trace_context
from speechgate.api.error_handlers import error_body
from speechgate.api.schemas import SpeechOptions, SpeechWord
from speechgate.api.state import app_state
from speechgate.errors import (
    InsufficientQuota,
    InvalidRequest,
    SessionExpired,
    SpeechgateError,
)
from speechgate.metering.records import CLIENT_CLOSED
from speechgate.metering.tenancy import Caller, Principal
from speechgate.serving import SessionCall
from speechgate.session_guard import stopped_status
from speechgate.speech_session import (
    SegmentDone,
    SegmentStarted,
    SegmentWords,
    SpeechSession,
)

router = APIRouter()
log = logging.getLogger(__name__)

# Close codes (RFC 6455): done, a bad message, a server failure, "try again later".
_NORMAL = 1000
_POLICY_VIOLATION = 1008
_INTERNAL_ERROR = 1011
_TRY_AGAIN_LATER = 1013


class SessionUpdate(BaseModel):
    type: Literal["session.update"]
    session: SpeechOptions


class TextDelta(BaseModel):
    type: Literal["input_text.delta"]
    delta: str


class TextControl(BaseModel):
    type: Literal["input_text.flush", "input_text.done"]


def _close_code(error: SpeechgateError) -> int:
    """Busy (a full queue, a key's rate) is worth retrying; a spent quota or a bad request is
    not; anything else is the server's failure. A session at its maximum length ends as
    sessions end: it had what it may have."""
    if isinstance(error, SessionExpired):
        return _NORMAL
    if error.status_code in (429, 503) and not isinstance(error, InsufficientQuota):
        return _TRY_AGAIN_LATER
    if 400 <= error.status_code < 500:
        return _POLICY_VIOLATION
    return _INTERNAL_ERROR


async def _fail(websocket: WebSocket, error: SpeechgateError) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        await websocket.send_json({"type": "error", **error_body(error)})
        await websocket.close(_close_code(error))


ClientMessage = SessionUpdate | TextDelta | TextControl
_MESSAGES: TypeAdapter[ClientMessage] = TypeAdapter(
    Annotated[ClientMessage, Field(discriminator="type")]
)


def _parse(raw: str) -> ClientMessage:
    try:
        return _MESSAGES.validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        param = ".".join(str(part) for part in first["loc"]) or None
        raise InvalidRequest(f"Invalid message: {first['msg']}.", param=param) from None


async def _receive(websocket: WebSocket) -> ClientMessage:
    """The client's next message. A binary frame is a bad message like any other (the
    protocol is JSON text), answered with an error event and a 1008 close."""
    frame = await websocket.receive()
    if frame["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(frame.get("code", 1000), frame.get("reason"))
    text = frame.get("text")
    if text is None:
        raise InvalidRequest(
            "Messages must be JSON text frames; binary frames are not accepted.",
            code="binary_message",
        )
    return _parse(text)


async def _feed(websocket: WebSocket, session: SpeechSession) -> None:
    """Pass the client's text to the session. Returns only when the client leaves (or raises
    on a bad message). It never stops reading, not even after `input_text.done`: uvicorn
    reads no further frames (a close included) until the app takes the last one, so this is
    how a client leaving mid-speech is noticed."""
    finished = False
    while True:
        message = await _receive(websocket)
        if isinstance(message, SessionUpdate):
            raise InvalidRequest("The session is already configured.", param="type")
        if finished:
            raise InvalidRequest("No text is accepted after input_text.done.", param="type")
        if isinstance(message, TextDelta):
            session.add_text(message.delta)
        elif message.type == "input_text.flush":
            session.flush()
        else:
            session.finish()
            finished = True


@router.websocket("/v1/audio/speech/stream")
async def speech_stream(websocket: WebSocket) -> None:
    await websocket.accept()
    # A session is one call: admitted at the start, its quota counted for each segment as it
    # is spoken, one usage record at the end.
    call = app_state(websocket).serving.session(f"ws_{uuid.uuid4().hex}")
    status = CLIENT_CLOSED
    # One trace for the session: its root span is current for the tasks that serve it.
    with tracing.request("websocket", trace_context(websocket.scope)):
        try:
            status = await _serve(websocket, call)
        finally:
            call.finish(status)


async def _serve(websocket: WebSocket, call: SessionCall) -> int:
    """Run the session; returns the status to record (HTTP's codes, 499 for a client gone)."""
    state = app_state(websocket)
    principal: Principal = websocket.state.principal
    address = websocket.client.host if websocket.client else None
    try:
        update = await _receive(websocket)
        if not isinstance(update, SessionUpdate):
            raise InvalidRequest("The first message must be session.update.", param="type")
        session = await call.open(update.session.to_speech(), Caller.of(principal, address))
    except SpeechgateError as error:
        await _fail(websocket, error)
        return error.status_code
    except WebSocketDisconnect:
        return CLIENT_CLOSED
    plan = session.plan
    await websocket.send_json(
        {
            "type": "session.created",
            "session": {
                "model": update.session.model,
                "engine": plan.engine,
                "voice": plan.voice_id or plan.request.voice,
                "response_format": update.session.response_format.name,
                "content_type": plan.output.format.content_type,
                "sample_rate": plan.output.sample_rate,
            },
        }
    )
    feeder = asyncio.create_task(_feed(websocket, session))
    settings = state.settings
    pacer = SendPacer(settings.sessions.max_lead_seconds or None)
    speaker = asyncio.create_task(_speak(websocket, session, pacer))
    lookup = partial(state.tenancy.authenticate, credentials(websocket))
    guard = asyncio.create_task(
        call.guard(settings.sessions.check_interval, settings.sessions.max_seconds, lookup)
    )
    # Whichever ends first decides: the speech ending (done or failed) stops the listening;
    # the client leaving or sending garbage stops the speech, and the job in its worker; the
    # key going bad or the session's time running out stops both.
    tasks = (feeder, speaker, guard)
    _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    status = 200 if session.completed else CLIENT_CLOSED
    for task in tasks:
        failure = task.exception() if not task.cancelled() else None
        if isinstance(failure, SpeechgateError):
            await _fail(websocket, failure)
            status = stopped_status(failure, session.audio_seconds)
        elif failure is not None and not isinstance(failure, WebSocketDisconnect | OSError):
            # A bug, not the client leaving (a send to a closed socket is an OSError).
            log.error("speech session failed", exc_info=failure)
            unexpected = SpeechgateError("The server had an error speaking this session.")
            await _fail(websocket, unexpected)
            status = unexpected.status_code
    return status


class SendPacer:
    """Keeps what a session has sent at most `max_lead` seconds of audio ahead of a client
    that plays it as it comes (on the event loop's clock). Bytes sent but not yet read wait in
    socket buffers, which hold minutes of audio: without a bound, a client would go on hearing
    them long after its session was closed."""

    def __init__(self, max_lead: float | None) -> None:
        self._max_lead = max_lead
        self._played_until = 0.0

    async def sent(self, seconds: float) -> None:
        """`seconds` of audio went out: wait until the lead is back within bounds."""
        if self._max_lead is None:
            return
        now = asyncio.get_running_loop().time()
        self._played_until = max(self._played_until, now) + seconds
        ahead = self._played_until - now - self._max_lead
        if ahead > 0:
            await asyncio.sleep(ahead)


async def _speak(websocket: WebSocket, session: SpeechSession, pacer: SendPacer) -> None:
    counted = 0.0
    async for item in session.speak():
        if isinstance(item, bytes):
            await websocket.send_bytes(item)
            # The audio an item holds is what the session encoded since the last one.
            await pacer.sent(session.audio_seconds - counted)
            counted = session.audio_seconds
        elif isinstance(item, SegmentStarted):
            await websocket.send_json(
                {
                    "type": "segment.started",
                    "segment": item.index,
                    "text": item.text,
                    "audio_start": round(item.audio_start, 3),
                }
            )
        elif isinstance(item, SegmentWords):
            text, base = session.recent_text
            words = [
                SpeechWord.of(word.shifted(chars=-base), text, chars=base).model_dump()
                for word in item.words
            ]
            await websocket.send_json(
                {"type": "segment.words", "segment": item.index, "words": words}
            )
        elif isinstance(item, SegmentDone):
            await websocket.send_json(
                {
                    "type": "segment.done",
                    "segment": item.index,
                    "audio_start": round(item.audio_start, 3),
                    "audio_end": round(item.audio_end, 3),
                }
            )
    await websocket.send_json(
        {
            "type": "session.done",
            "usage": {
                "input_characters": session.characters,
                "audio_seconds": round(session.audio_seconds, 3),
            },
        }
    )
    await websocket.close()
