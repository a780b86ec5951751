"""Admission control: admit a job only if it can expect a worker within `max_queue_wait`.

A request either gets an idle worker at once, or joins a FIFO queue if its predicted start is
within `max_queue_wait` (and the queue holds fewer than `queue_size`), or is turned away at
once (`QueueFull`, 429) with that prediction as its Retry-After. Once admitted, it waits its
turn: only a pool that stops serving altogether (`safety_wait`) ends the wait with a 503.

The prediction deals the work ahead (the rest of the jobs in service, then the queue in order)
to the workers as each frees, at the service rate measured on completed jobs: characters of
text per second of a worker's time. That is how the FIFO queue will run, so a long text ahead
makes everyone behind it wait longer, and a request is refused before it waits, not after.

A refused request that says who sends it (`retry_key`: its key, address and body) keeps a
place for its retry: a reservation of its work, due at its Retry-After. Requests arriving
meanwhile are admitted only if the retry, joining the queue when it is due, would still wait
at most half of `max_wait` (the other half absorbs the predictions' error); the retry takes
its place from its due time on, for `RETRY_GRACE` seconds, and then it expires. Without it,
fresh requests refill the queue before the retry comes and it is refused again.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, NoReturn, TypeVar

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
# Seconds a reserved place waits past its due time for the retry: a client's timer, a new
# connection or a proxy make it arrive a little late, never early.
RETRY_GRACE = 1.0


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


@dataclass(eq=False)
class _Reservation:
    key: Hashable
    work: float
    due: float  # on the admission's clock: when the refused request was told to retry


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
        # Places kept for refused requests' retries, by due time; at most `queue_size`.
        self._reservations: deque[_Reservation] = deque()
        self.rejected = {
            "queue_full": 0,
            "predicted_wait": 0,
            "held_for_retry": 0,
            "queue_stalled": 0,
        }

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

    @property
    def reserved(self) -> int:
        """Places kept for retries (expired ones go at the next request)."""
        return len(self._reservations)

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

    async def acquire(self, work: float = 1.0, retry_key: Hashable | None = None) -> T:
        """Admit a job of `work` characters and wait for its resource. Raises QueueFull at once
        when its predicted wait is beyond `max_wait` or the queue is full; QueueStalled only
        when nothing is served for `safety_wait` seconds.

        `retry_key` names the sender (what a client keeps across a retry); a request refused
        with one keeps a place for the retry at its Retry-After, which a request with the same
        key takes from then on."""
        now = self._clock()
        self._expire(now)
        retrying = retry_key is not None and self._claim(retry_key, now)
        # A retry's place was counted in the plans of all who came after it.
        keeps_places = retrying or self._keeps_reservations(now, work)
        if self._idle and not self.queued and keeps_places:
            resource = self._idle.pop(0)
            self._serving[resource] = (work, now)
            return resource
        waiting = self.queued + (0 if retrying else len(self._reservations))
        if waiting >= self._queue_size:
            self._refuse("queue_full", now, work, retry_key)
        if self.predicted_wait() > self._max_wait:
            self._refuse("predicted_wait", now, work, retry_key)
        if not keeps_places:
            self._refuse("held_for_retry", now, work, retry_key)
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

    def _refuse(self, reason: str, now: float, work: float, retry_key: Hashable | None) -> NoReturn:
        """Turn the request away with the start it can expect behind the queue and every kept
        place, keeping one for its retry if it has a key and there is room."""
        self.rejected[reason] += 1
        _, start = self._plan(now, None)
        if retry_key is None or len(self._reservations) >= self._queue_size:
            raise QueueFull(start)
        # Whole seconds, as Retry-After is written: both headers then name the instant the
        # place is kept from, and a retry is never early for it. Never before the places kept
        # already, so that places arrive in the order the plans assume.
        last = self._reservations[-1].due - now if self._reservations else 0.0
        retry_after = float(max(1, math.ceil(max(start, last) - 1e-9)))
        self._reservations.append(_Reservation(retry_key, work, now + retry_after))
        raise QueueFull(retry_after)

    def _expire(self, now: float) -> None:
        reservations = self._reservations
        while reservations and reservations[0].due + RETRY_GRACE < now:
            reservations.popleft()

    def _claim(self, retry_key: Hashable, now: float) -> bool:
        """Take the earliest place due for `retry_key`; one not yet due is not a retry's."""
        for reservation in self._reservations:
            if reservation.due > now:
                return False
            if reservation.key == retry_key:
                self._reservations.remove(reservation)
                return True
        return False

    def _keeps_reservations(self, now: float, work: float) -> bool:
        """Whether a job of `work` joining the queue now leaves every kept place within half
        of `max_wait` of its due time."""
        if not self._reservations:
            return True
        kept, _ = self._plan(now, work)
        return kept

    def _plan(self, now: float, work: float | None) -> tuple[bool, float]:
        """Deal the jobs in service, the queue (and `work`, joining it now), then the kept
        places at their due times to the workers as each frees, as the FIFO queue will.
        Returns whether every place starts within half of `max_wait` of its due time, and when
        a job arriving behind them all can expect to start (seconds from now)."""
        times = self._service_times
        free = [
            max(0.0, times.duration(job) - (now - started))
            for job, started in self._serving.values()
        ]
        free += [0.0] * max(0, self._capacity() - len(free))
        if not free:
            free = [0.0]
        heapq.heapify(free)
        queued = [times.duration(w.work) for w in self._waiters if not w.future.done()]
        if work is not None:
            queued.append(times.duration(work))
        for seconds in queued:
            heapq.heappush(free, heapq.heappop(free) + seconds)
        kept = True
        for reservation in self._reservations:
            due = reservation.due - now
            start = max(heapq.heappop(free), due)
            kept = kept and start - max(due, 0.0) <= self._max_wait / 2
            heapq.heappush(free, start + times.duration(reservation.work))
        return kept, free[0]

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

    def ending(self, resource: T) -> None:
        """`resource`'s job was cancelled: it ends at its worker's next step, so the work it
        had left is no longer in anyone's prediction."""
        if (serving := self._serving.get(resource)) is not None:
            self._serving[resource] = (0.0, serving[1])

    def discard(self, resource: T) -> None:
        """Forget a resource that is going away (a worker that died or is being restarted)."""
        self._serving.pop(resource, None)
        if resource in self._idle:
            self._idle.remove(resource)
