"""uvicorn, set up for clients that may be slow or hostile.

uvicorn bounds neither how long a request head may take nor its size, and its
`limit_concurrency` counts half-sent requests, so a few thousand idle sockets would lock out
every real client. `GuardedHttpProtocol` adds a head deadline and size bound, a connection cap
that sheds the oldest connection still waiting for a head, and a bound on how long a response
waits for a client that reads nothing. Bodies are bounded in `BodyLimitMiddleware`.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any, ClassVar

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from speechgate.settings import Settings


class _HeadTooLarge(Exception):
    """Raised in a parser callback: httptools then fails the parse, and uvicorn answers it."""


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with guards; `guarded_protocol` makes one per server.
    Event-loop only."""

    header_timeout: ClassVar[float]
    write_stall_timeout: ClassVar[float]
    max_header_bytes: ClassVar[int]
    max_connections: ClassVar[int]
    # Connections waiting for a request head, oldest first: those shed first.
    awaiting_head: ClassVar[dict[GuardedHttpProtocol, None]]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._head_too_large = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            oldest = next(iter(self.awaiting_head), None)
            if oldest is None:  # every connection is busy with a request: refuse this one
                transport.close()
                return
            self.awaiting_head.pop(oldest)
            oldest.transport.close()
        self.awaiting_head[self] = None
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        self._disarm_write_deadline()
        self.awaiting_head.pop(self, None)
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # From the first byte; the wait before it is uvicorn's keep-alive timeout.
        self._arm_head_deadline()
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm_head_deadline()
        self.awaiting_head.pop(self, None)
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        next_head_read = bool(self.pipeline)  # a pipelined request's head is already in
        super().on_response_complete()
        if not next_head_read and not self.transport.is_closing():
            self.awaiting_head[self] = None

    def pause_writing(self) -> None:
        # The client reads nothing for now: past this bound the connection is dropped, which
        # cancels the job as a client that left does.
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.write_stall_timeout, self._stalled)

    def resume_writing(self) -> None:
        self._disarm_write_deadline()
        super().resume_writing()

    def _disarm_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _stalled(self) -> None:
        self._write_deadline = None
        # abort, not close: close would wait to flush what the client does not read.
        self.transport.abort()

    def send_400_response(self, msg: str) -> None:
        if not self._head_too_large:
            super().send_400_response(msg)
            return
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"content-length: 0\r\nconnection: close\r\n\r\n"
        )
        self.transport.close()

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.max_header_bytes:
            self._head_too_large = True
            raise _HeadTooLarge

    def _arm_head_deadline(self) -> None:
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_later(self.header_timeout, self._head_too_slow)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        self.transport.close()


def default_max_connections() -> int:
    """Three quarters of the file-descriptor limit; the rest is for worker pipes, the store,
    logs and connections accepted before one is shed."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, soft * 3 // 4)


def connection_caps(settings: Settings) -> tuple[int, int]:
    """(HTTP, Wyoming) connections allowed at once: shares of one budget, so neither front end
    takes the file descriptors the other needs."""
    budget = settings.server.max_connections or default_max_connections()
    if settings.wyoming.uri is None:
        return budget, 0
    wyoming = settings.wyoming.max_connections or max(1, budget // 4)
    # A cap given with the default budget may not fit the file-descriptor limit's share.
    wyoming = min(wyoming, budget - 1)
    return budget - wyoming, wyoming


def guarded_protocol(settings: Settings) -> type[GuardedHttpProtocol]:
    return type(
        "GuardedHttpProtocol",
        (GuardedHttpProtocol,),
        {
            "header_timeout": settings.server.header_timeout,
            "write_stall_timeout": settings.pool.slow_reader_timeout,
            "max_header_bytes": settings.server.max_header_bytes,
            "max_connections": connection_caps(settings)[0],
            "awaiting_head": {},
        },
    )


def server_config(app: Any, settings: Settings, **options: Any) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        **{
            "host": settings.server.host,
            "port": settings.server.port,
            "http": guarded_protocol(settings),
            # uvicorn types it as int but asyncio.wait_for takes any number of seconds.
            "timeout_graceful_shutdown": settings.server.shutdown_grace,
            **options,
        },
    )
