"""Zeroconf (mDNS) advertisement of the Wyoming server: how Home Assistant discovers it."""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable

from zeroconf import InterfaceChoice
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

log = logging.getLogger(__name__)
SERVICE_TYPE = "_wyoming._tcp.local."
_MDNS_GROUP = "224.0.0.251"
_MAX_LABEL = 63  # bytes in one DNS label, the instance name's


def instance_name() -> str:
    """Stable across restarts (Home Assistant keys a discovered server by it), and one per
    machine; a clash on the network is resolved at registration."""
    return f"speechgate-{socket.gethostname()}".encode()[:_MAX_LABEL].decode(errors="ignore")


def _where(host: str) -> tuple[str, list[str] | InterfaceChoice]:
    """The address to advertise for a server bound to `host`, and the interfaces to announce
    it on: only that address's own, so a loopback server is never announced to the network."""
    try:
        bound = ipaddress.ip_address(host)
    except ValueError:  # a host name: the address it is bound to
        bound = ipaddress.ip_address(socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0])
    if not bound.is_unspecified:
        return str(bound), [str(bound)]
    # Bound to every interface: advertise the one multicast leaves through (no packet is sent).
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((_MDNS_GROUP, 5353))
        address: str = probe.getsockname()[0]
    return address, InterfaceChoice.All


async def advertise(host: str, port: int, name: str) -> Callable[[], Awaitable[None]]:
    """Register `name._wyoming._tcp.local.` for the server at host:port (a taken name gets a
    suffix); returns what withdraws it, with goodbyes so browsers drop it at once."""
    address, interfaces = _where(host)
    zeroconf = AsyncZeroconf(interfaces=interfaces)
    info = AsyncServiceInfo(
        SERVICE_TYPE, f"{name}.{SERVICE_TYPE}", port=port, parsed_addresses=[address]
    )
    try:
        # Returns once the name is probed and ours; the announcements go out after.
        await zeroconf.async_register_service(info, allow_name_change=True)
    except BaseException:
        await zeroconf.async_close()
        raise
    log.info("Wyoming server advertised over zeroconf as %s at %s:%d", info.name, address, port)

    async def withdraw() -> None:
        try:
            await (await zeroconf.async_unregister_service(info))
        finally:
            await zeroconf.async_close()

    return withdraw
