"""Resident memory of a server's process tree, sampled while a load runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import psutil


def tree_rss(pid: int) -> int:
    """Bytes resident in `pid` and all its descendants (a server and its engine workers)."""
    root = psutil.Process(pid)
    total = 0
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):  # exited between listing and reading
            total += process.memory_info().rss
    return total


class MemoryMeter:
    """The peak and the last of `tree_rss(pid)` over samples taken every `interval` seconds
    while `sampling()` runs. Sampled, so a peak shorter than the interval can be missed."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid = pid
        self.interval = interval
        self.peak = 0
        self.last = 0

    def sample(self) -> int:
        self.last = tree_rss(self.pid)
        self.peak = max(self.peak, self.last)
        return self.last

    @contextlib.asynccontextmanager
    async def sampling(self) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.interval)
                # A few /proc reads; off the loop, so they never delay a client's clock.
                await asyncio.to_thread(self.sample)

        self.sample()
        task = asyncio.create_task(loop())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.sample()
