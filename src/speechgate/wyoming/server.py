"""The Wyoming TCP server: started and stopped with the app's lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from wyoming.server import AsyncServer, AsyncTcpServer

from speechgate.metering.tenancy import Tenancy
from speechgate.runtime import Runtime
from speechgate.wyoming.handler import WyomingHandler

log = logging.getLogger(__name__)
_STOP_TIMEOUT = 5.0


async def start(
    uri: str, runtime: Runtime, tenancy: Tenancy, zeroconf: bool = False
) -> Callable[[], Awaitable[None]]:
    """Listen on `uri` (tcp://host:port), advertised over zeroconf if asked; returns what
    stops it, its connections' jobs with it."""
    server = AsyncServer.from_uri(uri)
    assert isinstance(server, AsyncTcpServer)  # settings accept only tcp:// URIs
    handlers: list[WyomingHandler] = []

    def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> WyomingHandler:
        handler = WyomingHandler(reader, writer, runtime, tenancy)
        handlers[:] = [*(h for h in handlers if not h.closed.is_set()), handler]
        return handler

    await server.start(connect)
    log.info("Wyoming server listening on %s", uri)
    withdraw = None
    if zeroconf:
        # Imported here: the zeroconf package is needed only by those who turn it on.
        from speechgate.wyoming import discovery

        try:
            withdraw = await discovery.advertise(
                server.host, server.port, discovery.instance_name()
            )
        except BaseException:
            await server.stop()
            raise

    async def stop() -> None:
        if withdraw is not None:  # first: nobody should discover a server that is going
            await withdraw()
        await server.stop()
        # Each handler's loop ends, cancelling its jobs, before the pools they use close.
        # A handler stuck writing to a client that reads nothing is not waited for long.
        waits = [asyncio.create_task(handler.closed.wait()) for handler in handlers]
        if waits:
            _, late = await asyncio.wait(waits, timeout=_STOP_TIMEOUT)
            for wait in late:
                wait.cancel()

    return stop
