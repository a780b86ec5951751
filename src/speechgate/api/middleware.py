"""ASGI middleware: request ids and the access log, response counts, the body size limit."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from speechgate.api.errors import error_response
from speechgate.errors import PayloadTooLarge
from speechgate.metrics import Metrics

access_log = logging.getLogger("speechgate.access")


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
        request_id = Headers(scope=scope).get("x-request-id") or f"req_{uuid.uuid4().hex}"
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
    """Answers 413 for bodies over `max_bytes`, declared or streamed.

    The body is read here, up to the limit, and replayed to the app: every route takes a body
    it reads whole anyway, and checking here keeps the 413 out of the frameworks' body parsing
    (which would turn any error raised there into a 400).
    """

    def __init__(
        self, app: ASGIApp, max_bytes: int, max_bytes_by_path: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_bytes_by_path = dict(max_bytes_by_path or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes_by_path.get(scope["path"], self.max_bytes)
        declared = Headers(scope=scope).get("content-length")
        too_large = declared is not None and declared.isdigit() and int(declared) > limit
        body = bytearray()
        more = not too_large
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left mid-body
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            too_large = len(body) > limit
            if too_large:
                break
        if too_large:
            # Read the rest before answering: a client still sending when the connection
            # closes sees a broken pipe instead of our 413.
            while (await receive()).get("more_body", False):
                pass
            error = PayloadTooLarge(f"Request body too large: the limit is {limit} bytes.")
            await error_response(error)(scope, receive, send)
            return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)
