"""What the HTTP routes share: serving a speech request through the one lifecycle
(`speechgate.serving`) while its client may leave, the response that streams an answer, and
the JSON content-type guard. No route module imports another; they all import this."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from typing import TypeVar

import anyio
from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from speechgate.audio.formats import AudioFormat
from speechgate.errors import UnsupportedMediaType
from speechgate.metering.tenancy import Caller
from speechgate.routing.providers import Answer
from speechgate.serving import Call, Waiting
from speechgate.speech_request import SpeechRequest

T = TypeVar("T")

AUDIO_CONTENT = {
    fmt.content_type: {"schema": {"type": "string", "format": "binary"}} for fmt in AudioFormat
}
"""The audio media types a speech route answers with, for its OpenAPI description."""


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


def while_connected(request: Request) -> Waiting:
    """The lifecycle's waits, each raced against `request`'s client leaving (ClientGone)."""

    def waiting(
        work: Awaitable[T], release: Callable[[T], Awaitable[object]] | None = None, /
    ) -> Awaitable[T]:
        return unless_disconnected(request, work, release)

    return waiting


def caller(request: Request) -> Caller:
    """Who an HTTP request comes from: the key it authenticated with, and its address."""
    return Caller.of(request.state.principal, request.client.host if request.client else None)


async def open_answer(
    request: Request, speech: SpeechRequest, sticky: str | None = None
) -> Answer | None:
    """`speech` served through the request's call (`UsageMiddleware` made it, and finishes
    it when the response ends), for a route that frames the body itself; None if the client
    left first. `sticky`: what else than `x-request-id` picks the same provider for a retry of
    a routed request (OpenAI's `user`)."""
    call: Call = request.state.call
    # Sticky: a retry with the same x-request-id (or the same user) picks the same provider.
    sticky = request.headers.get("x-request-id") or sticky
    try:
        return await call.open(speech, caller(request), while_connected(request), sticky)
    except ClientGone:
        return None


async def respond(
    request: Request,
    speech: SpeechRequest,
    sticky: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """Serve `speech`, whichever route translated it; returns once the first audio exists.
    `headers` are added to the answer's own."""
    answer = await open_answer(request, speech, sticky)
    if answer is None:
        # Nobody is listening; 499 (nginx's "client closed request") only reaches the logs.
        return Response(status_code=499)
    answer.headers.update(headers or {})
    # Headers go out now: a later error can only cut the body short, which clients see as
    # an incomplete chunked response (SSE gets an error event instead).
    return AnswerResponse(answer)


class ClosingResponse(StreamingResponse):
    """A streamed body whose source (a job, an upstream request) is closed however the
    response ends: `close` runs once the response is over, also when it was cancelled."""

    def __init__(
        self,
        body: AsyncIterable[bytes],
        close: Callable[[], Awaitable[object]],
        media_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(body, media_type=media_type, headers=headers)
        self._close = close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Shielded: a cancelled response must still close its source, or the job or the
            # upstream would go on for nobody.
            with anyio.CancelScope(shield=True):
                await self._close()


class AnswerResponse(ClosingResponse):
    """An answer's body, streamed; however the response ends, the answer ends with it, once.

    Starlette never iterates the body of a response cut before its first body message (the
    client gone while the headers go out, or the task cancelled), and a body generator never
    started runs no `finally`. The close here is what then ends the job and frees the router's
    in-flight count and the breaker's probe slot.
    """

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer.body, answer.aclose, answer.media_type, answer.headers)
