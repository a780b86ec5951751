"""The Wyoming TCP server: started and stopped with the app's lifespan.

Its connections are capped (`server.connection_caps`: Wyoming's share of the connection
budget the HTTP server has the rest of), so idle Wyoming clients cannot take the file
descriptors HTTP needs; each connection is closed after `wyoming.idle_timeout` of silence.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlparse

from speechgate.errors import AuthenticationFailed
from speechgate.runtime import Runtime
from speechgate.server import connection_caps
from speechgate.serving import Serving
from speechgate.settings import Settings
from speechgate.wyoming import session as wy
from speechgate.wyoming.events import EventLimits, max_event_bytes
from speechgate.wyoming.handler import BadEventLog, ConnectionLimits, WyomingHandler

log = logging.getLogger(__name__)
_STOP_TIMEOUT = 5.0


def connection_limits(settings: Settings) -> ConnectionLimits:
    event_bytes = max_event_bytes(settings.text.max_input_chars)
    return ConnectionLimits(
        events=EventLimits(max_line_bytes=event_bytes, max_data_bytes=event_bytes),
        idle_timeout=settings.wyoming.idle_timeout,
        write_timeout=settings.pool.slow_reader_timeout,
    )


class _Connections:
    """The open connections, oldest first, within the cap: a new one past it pushes out the
    oldest idle one, or is closed at once when every one is answering a request."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.open: dict[WyomingHandler, asyncio.Task[None]] = {}

    def admit(self, handler: WyomingHandler) -> bool:
        if len(self.open) >= self.cap:
            oldest_idle = next((h for h in self.open if not h.busy), None)
            if oldest_idle is None:
                return False
            # Out of the table at once: a flood of connections must not push out one each.
            self.open.pop(oldest_idle)
            oldest_idle.abort()
        return True


async def start(
    uri: str, runtime: Runtime, serving: Serving, zeroconf: bool = False
) -> Callable[[], Awaitable[None]]:
    """Listen on `uri` (tcp://host:port), advertised over zeroconf if asked; returns what
    stops it, its connections' jobs with it. Fails at once if `wyoming.principal` names no
    key."""
    settings = runtime.settings
    if settings.wyoming.principal is not None:
        try:
            await wy.caller(runtime, serving.tenancy)
        except AuthenticationFailed:
            raise RuntimeError(
                f"wyoming.principal {settings.wyoming.principal!r} names no usable key "
                "(unknown, revoked or expired): `speechgate keys list` shows the ids"
            ) from None
    limits = connection_limits(settings)
    bad_events = BadEventLog()
    connections = _Connections(connection_caps(settings)[1])
    parsed = urlparse(uri)
    assert parsed.hostname is not None and parsed.port is not None  # settings check the URI

    async def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = WyomingHandler(reader, writer, runtime, serving, limits, bad_events)
        if not connections.admit(handler):
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        connections.open[handler] = task
        try:
            await handler.run()
        finally:
            connections.open.pop(handler, None)

    # The stream's buffer bound is the header line's: a longer line is refused unread.
    server = await asyncio.start_server(
        connect, parsed.hostname, parsed.port, limit=limits.events.max_line_bytes
    )
    port = server.sockets[0].getsockname()[1]
    log.info("Wyoming server listening on %s", uri)
    withdraw = None
    if zeroconf:
        # Imported here: the zeroconf package is needed only by those who turn it on.
        from speechgate.wyoming import discovery

        try:
            withdraw = await discovery.advertise(parsed.hostname, port, discovery.instance_name())
        except BaseException:
            server.close()
            await server.wait_closed()
            raise

    async def stop() -> None:
        if withdraw is not None:  # first: nobody should discover a server that is going
            await withdraw()
        server.close()
        # Each handler's loop ends, cancelling its jobs, before the pools they use close.
        # A handler stuck writing to a client that reads nothing is not waited for long.
        handlers = list(connections.open)
        for handler in handlers:
            handler.abort()
        waits = [asyncio.create_task(handler.closed.wait()) for handler in handlers]
        if waits:
            _, late = await asyncio.wait(waits, timeout=_STOP_TIMEOUT)
            for wait in late:
                wait.cancel()
        for task in connections.open.values():
            task.cancel()

    return stop
