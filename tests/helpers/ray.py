"""A scripted Ray Serve handle: what `RayPool` is given instead of a running deployment.

Each stream is a script of what Serve would deliver: the replica's `Started`, audio chunks,
Ray's exceptions, or a wait that never ends.
"""

from __future__ import annotations

import asyncio
from typing import Any

from speechgate.engines.base import EngineConfig
from speechgate.workers.ray_pool import RayCluster, RayPool

NEVER = object()  # a script item: Serve delivers nothing more


class Gate:
    """A script item: Serve delivers nothing until the test opens the gate."""

    def __init__(self) -> None:
        self.open = asyncio.Event()


class FakeResponse:
    """What `handle.options(stream=True).synthesize.remote()` returns, from a script."""

    def __init__(self, script: list[object]) -> None:
        self._script = list(script)
        self.cancelled = False

    def __aiter__(self) -> FakeResponse:
        return self

    async def __anext__(self) -> object:
        if not self._script:
            raise StopAsyncIteration
        item = self._script.pop(0)
        if item is NEVER:
            await asyncio.Event().wait()
        if isinstance(item, Gate):
            await item.open.wait()
            return await self.__anext__()
        if isinstance(item, BaseException):
            raise item
        return item

    def cancel(self) -> None:
        self.cancelled = True


class FakeHandle:
    """Answers the n-th call with the n-th script (the last one for every call after)."""

    def __init__(self, *scripts: list[object]) -> None:
        self.responses = [FakeResponse(script) for script in scripts]
        self.response = self.responses[0]
        self.calls = 0
        self.synthesize = self
        self.clone = self

    def options(self, **_: object) -> FakeHandle:
        return self

    def remote(self, *_: object) -> FakeResponse:
        self.calls += 1
        return self.responses[min(self.calls, len(self.responses)) - 1]


def make_pool(
    script: list[object], *then: list[object], **overrides: Any
) -> tuple[RayPool, FakeResponse]:
    """A RayPool whose handle answers the first call with `script`, the next with `then`'s (the
    last one for every call after); also returns the first call's response."""
    handle = FakeHandle(script, *then)
    options: dict[str, Any] = {
        "replicas": 1,
        "max_replicas": None,
        "queue_size": 2,
        "max_queue_wait": 30.0,
        "job_timeout": 30.0,
        **overrides,
    }
    pool = RayPool(EngineConfig("espeak"), RayCluster(owned=False), handle=handle, **options)
    return pool, handle.response
