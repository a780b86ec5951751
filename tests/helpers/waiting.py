"""Waiting for state owned by the server (in another thread or process) to change.

These poll: the pool exposes no events for its states, and tests observe it from outside.
Each wait is bounded, and returns as soon as the condition holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

_TIMEOUT = 30.0
_POLL = 0.01


def wait_for(condition: Callable[[], bool], timeout: float = _TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(_POLL)


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(_TIMEOUT):
        while not condition():  # noqa: ASYNC110 - nothing to await but the state itself
            await asyncio.sleep(_POLL)
