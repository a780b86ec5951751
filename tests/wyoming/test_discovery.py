"""Zeroconf advertisement, found by zeroconf's own browser as Home Assistant finds it.

Browsing is on loopback's address (`interfaces=["127.0.0.1"]`): the server is bound there, so
it is announced there and nowhere else."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack

import pytest
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from zeroconf import ServiceStateChange, Zeroconf
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from speechgate.wyoming.discovery import SERVICE_TYPE
from tests.helpers.server import free_port, running_server
from tests.helpers.settings import make_settings

pytestmark = pytest.mark.slow

_TIMEOUT = 30.0
Change = tuple[str, ServiceStateChange]
ADDED, REMOVED = ServiceStateChange.Added, ServiceStateChange.Removed


class Browser:
    """Every change to `_wyoming._tcp` seen on loopback, in order."""

    def __init__(self) -> None:
        self.zeroconf = AsyncZeroconf(interfaces=["127.0.0.1"])
        self.changes: asyncio.Queue[Change] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def on_change(
            zeroconf: Zeroconf, service_type: str, name: str, state_change: ServiceStateChange
        ) -> None:
            loop.call_soon_threadsafe(self.changes.put_nowait, (name, state_change))

        self.browser = AsyncServiceBrowser(self.zeroconf.zeroconf, SERVICE_TYPE, [on_change])

    async def next(self, wanted: ServiceStateChange) -> str:
        while True:
            name, change = await asyncio.wait_for(self.changes.get(), _TIMEOUT)
            if change is wanted:
                return name

    async def resolve(self, name: str) -> AsyncServiceInfo | None:
        """None for one gone before it answered (another test's server, say)."""
        info = AsyncServiceInfo(SERVICE_TYPE, name)
        found = await info.async_request(self.zeroconf.zeroconf, int(_TIMEOUT * 1000))
        return info if found else None

    async def close(self) -> None:
        await self.browser.async_cancel()
        await self.zeroconf.async_close()


def test_the_server_is_discovered_reached_and_withdrawn() -> None:
    port = free_port()
    settings = make_settings(
        engines=["espeak"],
        default_engine="espeak",
        pool={"workers": 1},
        wyoming={"uri": f"tcp://127.0.0.1:{port}", "zeroconf": True},
    )

    async def go() -> tuple[AsyncServiceInfo, Info, str]:
        browser = Browser()
        try:
            with ExitStack() as server:
                # In a thread: the browser keeps listening while the server starts and stops.
                await asyncio.to_thread(server.enter_context, running_server(settings))
                # Other servers on this machine may be advertised too: ours is on our port.
                while (info := await browser.resolve(await browser.next(ADDED))) is None or (
                    info.port != port
                ):
                    pass
                (address,) = info.parsed_addresses()
                async with AsyncTcpClient(address, port) as connection:
                    await connection.write_event(Describe().event())
                    event = await asyncio.wait_for(connection.read_event(), _TIMEOUT)
                    assert event is not None
                await asyncio.to_thread(server.close)
            # Withdrawn on shutdown: browsers drop it at once, not when its record expires.
            while (gone := await browser.next(REMOVED)) != info.name:
                pass
            return info, Info.from_event(event), gone
        finally:
            await browser.close()

    info, described, gone = asyncio.run(go())
    assert info.name.startswith("speechgate-") and info.name.endswith(f".{SERVICE_TYPE}")
    assert info.parsed_addresses() == ["127.0.0.1"]
    assert [program.name for program in described.tts] == ["espeak"]
    assert gone == info.name


@pytest.mark.parametrize("uri", [None, "tcp://127.0.0.1:0"])
def test_zeroconf_needs_a_wyoming_server_on_a_fixed_port(uri: str | None) -> None:
    with pytest.raises(ValueError, match=r"wyoming\.zeroconf needs"):
        make_settings(wyoming={"uri": uri, "zeroconf": True})
