"""ASGI middleware: request ids and the access log, response counts, the body size limit."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Mapping

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from speechgate.api.error_handlers import openai_error_response
from speechgate.errors import PayloadTooLarge, RequestTimeout, SpeechgateError
from speechgate.metrics import Metrics

access_log = logging.getLogger("speechgate.access")

# A client's id is echoed in a header, logged and stored: short, and nothing that could split
# a log line or a header (visible ASCII only).
_CLIENT_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")

# After a 413, how long the rest of a body still being sent is read and dropped before the
# connection closes: closing on unread data makes the kernel send a reset, which can destroy
# the 413 before the client reads it. Bounded, so a client that keeps sending is cut off.
_LINGER_SECONDS = 2.0


def request_id_of(headers: Headers) -> str:
    """The client's `x-request-id` if it is a sane one, else a new id."""
    given = headers.get("x-request-id")
    if given is not None and _CLIENT_REQUEST_ID.fullmatch(given):
        return given
    return f"req_{uuid.uuid4().hex}"


class RequestIdMiddleware:
    """Gives every request an id (the client's `x-request-id`, or a new one), echoed back,
    and writes its access-log line once it has ended.

    The line comes at the end, with the request's id and duration, rather than uvicorn's
    (which `speechgate serve` turns off): uvicorn writes its line when the response starts,
    and for speech that is on the way to the first audio byte.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = request_id_of(Headers(scope=scope))
        scope.setdefault("state", {})["request_id"] = request_id
        status = 0  # none sent: the client left first, or the app failed

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)["x-request-id"] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if access_log.isEnabledFor(logging.INFO):
                client = scope.get("client")
                query = scope.get("query_string", b"").decode("latin-1")
                access_log.info(
                    '%s - "%s %s%s HTTP/%s" %s %s %.1f ms',
                    f"{client[0]}:{client[1]}" if client else "-",
                    scope["method"],
                    scope["path"],
                    f"?{query}" if query else "",
                    scope.get("http_version", "1.1"),
                    status or "-",
                    request_id,
                    (time.perf_counter() - started) * 1000,
                )


class ResponseMetricsMiddleware:
    """Counts responses by route template (not raw path, which clients control) and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def observe(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.responses.labels(template, str(status)).inc()


class BodyLimitMiddleware:
    """Answers 413 for bodies over `max_bytes`, declared or streamed, and 408 for a body that
    stops arriving for `body_timeout` seconds; both close the connection.

    The body is read here, up to the limit, and replayed to the app: every route takes a body
    it reads whole anyway, and checking here keeps the 413 out of the frameworks' body parsing
    (which would turn any error raised there into a 400). Nothing past the limit is kept.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        max_bytes_by_path: Mapping[str, int] | None = None,
        body_timeout: float = 30.0,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_bytes_by_path = dict(max_bytes_by_path or {})
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes_by_path.get(scope["path"], self.max_bytes)
        too_large = PayloadTooLarge(f"Request body too large: the limit is {limit} bytes.")
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            # A client waiting for `100 Continue` has sent nothing and will send nothing.
            expects = headers.get("expect", "").lower() == "100-continue"
            await _refuse(too_large, scope, receive, send, unread=not expects)
            return
        body = bytearray()
        more = True
        while more:
            try:
                async with asyncio.timeout(self.body_timeout):
                    message = await receive()
            except TimeoutError:
                stalled = RequestTimeout(
                    f"The request body stopped arriving for {self.body_timeout:g} seconds."
                )
                await _refuse(stalled, scope, receive, send, unread=False)
                return
            if message["type"] != "http.request":  # the client left mid-body
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > limit:
                body.clear()
                await _refuse(too_large, scope, receive, send, unread=more)
                return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


async def _refuse(
    error: SpeechgateError, scope: Scope, receive: Receive, send: Send, *, unread: bool
) -> None:
    """Answers `error` at once and closes the connection; with `unread`, first reads and
    drops what the client is still sending, for a bounded time (see `_LINGER_SECONDS`)."""
    response = openai_error_response(error)
    response.headers["connection"] = "close"

    async def send_all_but_the_end(message: Message) -> None:
        # The whole answer goes out now; only the end of the response, which makes uvicorn
        # close the connection, waits for the linger below.
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            message = {**message, "more_body": True}
        await send(message)

    if not unread:
        await response(scope, receive, send)
        return
    await response(scope, receive, send_all_but_the_end)
    try:
        async with asyncio.timeout(_LINGER_SECONDS):
            while (await receive()).get("more_body", False):
                pass
    except TimeoutError:
        pass
    await send({"type": "http.response.body", "body": b"", "more_body": False})
