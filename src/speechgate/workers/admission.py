"""Admission control: admit a job only if it can expect a worker within `max_queue_wait`.

A request either gets an idle worker at once, or joins a FIFO queue if its predicted start is
within `max_queue_wait` (and the queue holds fewer than `queue_size`), or is turned away at
once (`QueueFull`, 429) with that prediction as its Retry-After. Once admitted, it waits its
turn: only a pool that stops serving altogether (`safety_wait`) ends the wait with a 503.

The prediction deals the work ahead (the rest of the jobs in service, then the queue in order)
to the workers as each frees, at the service rate measured on completed jobs: characters of
text per second of a worker's time. That is how the FIFO queue will run, so a long text ahead
makes everyone behind it wait longer, and a request is refused before it waits, not after.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from speechgate.errors import QueueFull, QueueStalled

T = TypeVar("T")

# Until real jobs have been timed, assume a short clip takes about a second.
_DEFAULT_SERVICE_TIME = 1.0
# Until a speech job has been timed, assume a worker speaks only in real time (English speech
# runs at about 15 characters a second): no faster than the slowest engine here on one core
# (Kokoro, ~1-1.5x real time; Piper ~12x, espeak-ng ~1000x), so the first predictions overstate
# waits and refuse early rather than admit a queue that cannot be served in time. The first
# completed job replaces it.
PRIOR_CHARACTERS_PER_SECOND = 15.0
# Characters of text per second of speech, until measured: what a cloning job's prompt is
# worth in the work of speaking it (computing a voice state costs no more than speaking it).
_PRIOR_CHARACTERS_PER_AUDIO_SECOND = 15.0


def safety_wait(max_queue_wait: float, job_timeout: float) -> float:
    """How long an admitted request waits before it is told the pool is stalled (503).

    Far above any wait admission predicts: every job ahead may run until `job_timeout` kills
    it, and ten queues' worth of waiting beyond that means no worker is coming back."""
    return job_timeout + 10 * max_queue_wait


def predicted_start(remaining: Iterable[float], queued: Iterable[float], servers: int) -> float:
    """Seconds until a job joining the queue now starts.

    `remaining`: seconds left of each job in service; `queued`: the seconds each queued job
    will take, in queue order; `servers`: workers serving (idle ones count as free now). The
    queued jobs go, in order, to whichever worker frees first, as the FIFO queue hands them out.
    """
    free = sorted(remaining)
    free += [0.0] * max(0, servers - len(free))
    if not free:
        free = [0.0]
    heapq.heapify(free)
    for seconds in queued:
        heapq.heappush(free, heapq.heappop(free) + seconds)
    return free[0]


class ServiceTimes:
    """Recent speech jobs' durations, audio and characters: the measured service rate behind
    admission and Retry-After, and the real-time factor reported to clients."""

    def __init__(self, window: int = 64) -> None:
        self._recent: deque[tuple[float, float, float]] = deque(maxlen=window)
        # Running sums over the window: read on every admission, so never summed there.
        self._busy = 0.0
        self._audio = 0.0
        self._characters = 0.0
        self._recorded = 0

    def record(self, seconds: float, audio_seconds: float = 0.0, characters: float = 0.0) -> None:
        """One completed job: `seconds` of a worker's time for `characters` of text, which
        gave `audio_seconds` of speech."""
        if len(self._recent) == self._recent.maxlen:
            old_seconds, old_audio, old_characters = self._recent[0]
            self._busy -= old_seconds
            self._audio -= old_audio
            self._characters -= old_characters
        self._recent.append((seconds, audio_seconds, characters))
        self._busy += seconds
        self._audio += audio_seconds
        self._characters += characters
        self._recorded += 1
        if self._recorded % len(self._recent) == 0:  # now and then, exactly: no drift
            self._busy = math.fsum(job[0] for job in self._recent)
            self._audio = math.fsum(job[1] for job in self._recent)
            self._characters = math.fsum(job[2] for job in self._recent)

    @property
    def mean(self) -> float:
        """Mean seconds per job (a default before any job)."""
        if not self._recent:
            return _DEFAULT_SERVICE_TIME
        return self._busy / len(self._recent)

    @property
    def rate(self) -> float:
        """Characters one worker speaks per second of its time (the prior before any job)."""
        if self._characters > 0 and self._busy > 0:
            return self._characters / self._busy
        return PRIOR_CHARACTERS_PER_SECOND

    def duration(self, work: float) -> float:
        """Seconds one worker is expected to take for `work` characters."""
        return work / self.rate

    def clone_work(self, prompt_seconds: float) -> float:
        """A cloning job's work in characters: those of speaking as long as its prompt."""
        per_audio_second = (
            self._characters / self._audio
            if self._characters > 0 and self._audio > 0
            else _PRIOR_CHARACTERS_PER_AUDIO_SECOND
        )
        return prompt_seconds * per_audio_second

    @property
    def real_time_factor(self) -> float | None:
        """Seconds of audio per second of work over the recent jobs; None before any."""
        return self._audio / self._busy if self._recent and self._busy > 0 else None


@dataclass(eq=False)
class _Waiter(Generic[T]):
    future: asyncio.Future[T]
    work: float


class Admission(Generic[T]):
    """A FIFO of admitted waiters in front of a set of interchangeable resources (free job
    slots of the workers).

    Idle resources are handed out lowest `rank` first (default: all equal, oldest first). The
    pool ranks workers by index, so a light load keeps landing on the same few workers, whose
    engines stay warm in their cores' caches, instead of rotating through all of them.

    A resource handed out is in service until it is released (or discarded): its job's work
    and start count in the predictions of those who come after.

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
        safety_wait: float | None = None,
        share: Callable[[], int] = lambda: 1,
    ) -> None:
        """`safety_wait`: seconds after which an admitted waiter gives up on a pool that
        serves nobody (`QueueStalled`); default ten times `max_wait`. `share`: how many
        resources share one worker's time now (a worker's open job slots): while all are taken,
        as they are whenever anyone waits, each job runs at 1/`share` of the measured rate."""
        self._queue_size = queue_size
        self._max_wait = max_wait
        self._safety_wait = safety_wait if safety_wait is not None else 10 * max_wait
        self._capacity = capacity
        self._service_times = service_times
        self._clock = clock
        self._rank = rank
        self._share = share
        self._idle: list[T] = []  # sorted by rank
        self._waiters: deque[_Waiter[T]] = deque()
        self._serving: dict[T, tuple[float, float]] = {}  # resource -> (work, started)
        self.rejected = {"queue_full": 0, "predicted_wait": 0, "queue_stalled": 0}

    @property
    def queued(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.future.done())

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def serving(self) -> int:
        """Resources handed out and not yet released."""
        return len(self._serving)

    def predicted_wait(self) -> float:
        """Seconds until a request that joins the queue now can expect a worker."""
        if self._idle and not self.queued:
            return 0.0
        now = self._clock()

        # Seconds of a slot's time: `share` jobs divide a worker's.
        share = self._share()

        def duration(work: float) -> float:
            return self._service_times.duration(work) * share

        remaining = [
            max(0.0, duration(work) - (now - started)) for work, started in self._serving.values()
        ]
        queued = [duration(w.work) for w in self._waiters if not w.future.done()]
        return predicted_start(remaining, queued, max(self._capacity(), len(remaining)))

    async def acquire(self, work: float = 1.0) -> T:
        """Admit a job of `work` characters and wait for its resource. Raises QueueFull at once
        when its predicted wait is beyond `max_wait` or the queue is full; QueueStalled only
        when nothing is served for `safety_wait` seconds."""
        if self._idle and not self.queued:
            resource = self._idle.pop(0)
            self._serving[resource] = (work, self._clock())
            return resource
        wait = self.predicted_wait()
        if self.queued >= self._queue_size:
            self.rejected["queue_full"] += 1
            raise QueueFull(wait)
        if wait > self._max_wait:
            self.rejected["predicted_wait"] += 1
            raise QueueFull(wait)
        waiter = _Waiter[T](asyncio.get_running_loop().create_future(), work)
        self._waiters.append(waiter)
        granted = False
        try:
            async with asyncio.timeout(self._safety_wait):
                resource = await waiter.future
            granted = True
            return resource
        except TimeoutError:
            self.rejected["queue_stalled"] += 1
            raise QueueStalled(self._safety_wait, self._max_wait) from None
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            # Handed a resource in the same loop turn as a cancellation or timeout: pass it on.
            future = waiter.future
            if not granted and future.done() and not future.cancelled():
                self.release(future.result())

    def release(self, resource: T) -> None:
        """End `resource`'s job, if it had one, and give it to the longest-waiting request,
        or mark it idle."""
        self._serving.pop(resource, None)
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.future.done():
                waiter.future.set_result(resource)
                self._serving[resource] = (waiter.work, self._clock())
                return
        bisect.insort_right(self._idle, resource, key=self._rank)

    def discard(self, resource: T) -> None:
        """Forget a resource that is going away (a worker that died or is being restarted)."""
        self._serving.pop(resource, None)
        if resource in self._idle:
            self._idle.remove(resource)
