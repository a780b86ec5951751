"""Resident memory of a server's process tree, sampled while a load runs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import psutil


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _rss(processes: list[psutil.Process]) -> int:
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):  # exited between listing and reading
            total += process.memory_info().rss
    return total


def tree_rss(pid: int) -> int:
    return _rss(_tree(pid))


class MemoryMeter:
    """The peak and the last of `tree_rss(pid)`, sampled every `interval` seconds while
    `sampling()` runs. Listing reads every process on the machine, whose cores the server
    uses, so the tree is listed only every `relist` seconds or when a process exited."""

    def __init__(self, pid: int, interval: float = 0.5, relist: float = 5.0) -> None:
        self.pid = pid
        self.interval = interval
        self.relist = relist
        self.peak = 0
        self.last = 0
        self._processes: list[psutil.Process] = []
        self._listed_at = 0.0

    def sample(self) -> int:
        now = time.monotonic()
        exited = not all(process.is_running() for process in self._processes)
        if not self._processes or exited or now - self._listed_at >= self.relist:
            self._processes, self._listed_at = _tree(self.pid), now
        self.last = _rss(self._processes)
        self.peak = max(self.peak, self.last)
        return self.last

    @contextlib.asynccontextmanager
    async def sampling(self) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.interval)
                # Off the loop, so they never delay a client's clock.
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
