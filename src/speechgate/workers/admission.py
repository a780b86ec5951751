"""Admission control: hand idle workers to requests in FIFO order, with a bounded wait queue.

A request either gets a worker at once, waits in a queue of at most `queue_size` for at most
`max_wait` seconds, or is turned away with an estimate of when to retry.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from speechgate.errors import QueueFull, QueueTimeout

T = TypeVar("T")

# Until real jobs have been timed, assume a short clip takes about a second.
_DEFAULT_SERVICE_TIME = 1.0


class ServiceTimes:
    """Recent jobs' durations and audio: the basis of Retry-After estimates and of the
    real-time factor reported to clients."""

    def __init__(self, window: int = 64) -> None:
        self._recent: deque[tuple[float, float]] = deque(maxlen=window)
        # Running sums over the window: read on every response, so never summed there.
        self._busy = 0.0
        self._audio = 0.0
        self._recorded = 0

    def record(self, seconds: float, audio_seconds: float = 0.0) -> None:
        if len(self._recent) == self._recent.maxlen:
            old_seconds, old_audio = self._recent[0]
            self._busy -= old_seconds
            self._audio -= old_audio
        self._recent.append((seconds, audio_seconds))
        self._busy += seconds
        self._audio += audio_seconds
        self._recorded += 1
        if self._recorded % len(self._recent) == 0:  # now and then, exactly: no drift
            self._busy = math.fsum(seconds for seconds, _ in self._recent)
            self._audio = math.fsum(audio for _, audio in self._recent)

    @property
    def mean(self) -> float:
        """Mean seconds per job (a default before any job)."""
        if not self._recent:
            return _DEFAULT_SERVICE_TIME
        return self._busy / len(self._recent)

    def wait(self, position: int, servers: int) -> float:
        """Seconds until the request at queue `position` (1 = next) can expect one of
        `servers` to be free: the Retry-After estimate."""
        return self.mean * position / max(1, servers)

    @property
    def real_time_factor(self) -> float | None:
        """Seconds of audio per second of work over the recent jobs; None before any."""
        return self._audio / self._busy if self._recent and self._busy > 0 else None


class Admission(Generic[T]):
    """A FIFO of waiters in front of a set of interchangeable resources (idle workers).

    Idle resources are handed out lowest `rank` first (default: all equal, oldest first). The
    pool ranks workers by index, so a light load keeps landing on the same few workers, whose
    engines stay warm in their cores' caches, instead of rotating through all of them.

    Not thread-safe: used from the gateway's event loop only.
    """

    def __init__(
        self,
        queue_size: int,
        max_wait: float,
        capacity: Callable[[], int],
        service_times: ServiceTimes,
        clock: Callable[[], float] = time.monotonic,
        rank: Callable[[T], int] = lambda _: 0,
    ) -> None:
        self._queue_size = queue_size
        self._max_wait = max_wait
        self._capacity = capacity
        self._service_times = service_times
        self._clock = clock
        self._rank = rank
        self._idle: list[T] = []  # sorted by rank
        self._waiters: deque[asyncio.Future[T]] = deque()
        self.rejected = {"queue_full": 0, "queue_timeout": 0}

    @property
    def queued(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.done())

    @property
    def idle(self) -> int:
        return len(self._idle)

    def retry_after(self, position: int) -> float:
        """Seconds until the request at queue `position` (1 = next) can expect a worker."""
        return self._service_times.wait(position, self._capacity())

    async def acquire(self) -> T:
        """Wait for a resource; raises QueueFull at once or QueueTimeout after `max_wait`."""
        if self._idle and not self.queued:
            return self._idle.pop(0)
        if self.queued >= self._queue_size:
            self.rejected["queue_full"] += 1
            raise QueueFull(self.retry_after(self.queued + 1))
        waiter: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        started = self._clock()
        granted = False
        try:
            async with asyncio.timeout(self._max_wait):
                resource = await waiter
            granted = True
            return resource
        except TimeoutError:
            self.rejected["queue_timeout"] += 1
            raise QueueTimeout(self._clock() - started, self.retry_after(self.queued + 1)) from None
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            # Handed a resource in the same loop turn as a cancellation or timeout: pass it on.
            if not granted and waiter.done() and not waiter.cancelled():
                self.release(waiter.result())

    def release(self, resource: T) -> None:
        """Give `resource` to the longest-waiting request, or mark it idle."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(resource)
                return
        bisect.insort_right(self._idle, resource, key=self._rank)

    def discard(self, resource: T) -> None:
        """Forget an idle resource that is going away (a worker being restarted)."""
        if resource in self._idle:
            self._idle.remove(resource)
