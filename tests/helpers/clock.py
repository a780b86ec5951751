"""A test's own clock, and an event loop that runs on it: timeouts fire when the test moves
the clock past them, so waits of minutes take no real time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class Clock:
    """Time that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class _ClockLoop(asyncio.SelectorEventLoop):
    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self._test_clock = clock

    def time(self) -> float:
        return self._test_clock()


def run_on(clock: Clock, scenario: Callable[[], Awaitable[T]]) -> T:
    """Run `scenario` on a loop whose time is `clock`; tasks it leaves are cancelled."""
    loop = _ClockLoop(clock)
    try:
        return loop.run_until_complete(scenario())
    finally:
        if left := asyncio.all_tasks(loop):
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.wait(left))
        loop.close()


async def settle() -> None:
    """Let every task run until it waits for something other than the loop."""
    for _ in range(5):
        await asyncio.sleep(0)
