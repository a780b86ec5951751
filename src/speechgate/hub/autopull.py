"""Pulling on first request (`Settings.hub.auto_pull`): what the gateway calls when a request
names a voice or model that is not installed but can be pulled.

One pull per reference at a time: concurrent requests for the same missing voice wait for the
one download rather than starting their own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

from speechgate.hub.client import Hub, Progress
from speechgate.hub.index import Index
from speechgate.hub.pull import pull
from speechgate.hub.refs import parse_ref
from speechgate.voices.installed import InstalledItem, find

_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(key: tuple[str, str]) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def ensure_installed(
    ref: str, *, models: Path, hub: Hub, progress: Progress | None = None
) -> tuple[InstalledItem, bool]:
    """The installed item `ref` names, pulled first if missing, and whether this call pulled
    it. Blocking; thread-safe."""
    engine, name = parse_ref(ref)
    with _lock_for((engine, name)):
        item = find(models, engine, name)
        if item is not None:
            return item, False
        return pull(ref, models=models, hub=hub, progress=progress, index=Index(hub)), True


async def autopull(
    ref: str,
    *,
    models: Path,
    hub: Hub,
    refresh: Callable[[], None] | None = None,
) -> InstalledItem:
    """`ensure_installed` off the event loop, then `refresh()`."""
    item, _ = await asyncio.to_thread(ensure_installed, ref, models=models, hub=hub)
    if refresh is not None:
        # Even when this call did not pull: the caller that did may not have refreshed yet.
        refresh()
    return item
