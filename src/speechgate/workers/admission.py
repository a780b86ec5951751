"""Admission control: admit a job only if it can expect a worker within `max_queue_wait`,
else refuse it at once (`QueueFull`, 429) with the predicted start as its Retry-After. The
prediction deals the work ahead to the workers as each frees, at the measured characters per
second of a worker's time; once admitted, only a pool serving nobody ends the wait (503).

Senders (API key, address, principal) share the workers by start-time fair queueing on
characters, so a flood from one sender delays that sender; a full queue pushes out the newest
request of a sender over its share, and a sender crowded out of every slot gets a guest place.

A refused request with a `retry_key` may keep a place due at its Retry-After, or fresh requests
would refill the queue before it comes; a sender keeps at most its share of places, so a caller
looping on 429 cannot reserve the queue for itself.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, NoReturn, TypeVar

from speechgate.errors import QueueFull, QueueStalled

T = TypeVar("T")

_DEFAULT_SERVICE_TIME = 1.0
# Until the first job or warm-up is timed, assume real-time speech: no engine is slower, so
# early predictions err toward refusing rather than admitting a queue that cannot be served.
PRIOR_CHARACTERS_PER_SECOND = 15.0
# A cloning prompt costs about what speaking it does.
_PRIOR_CHARACTERS_PER_AUDIO_SECOND = 15.0
# A retry arrives a little late (client timer, new connection, proxy), never early.
RETRY_GRACE = 1.0
# A client told to come back in minutes goes elsewhere, and such a prediction is mostly error.
MAX_RETRY_AFTER = 30.0


def safety_wait(max_queue_wait: float, job_timeout: float) -> float:
    """How long an admitted request waits before it is told the pool is stalled (503): past
    `job_timeout` and ten queues' worth of waiting, no worker is coming back."""
    return job_timeout + 10 * max_queue_wait


def predicted_start(remaining: Iterable[float], queued: Iterable[float], servers: int) -> float:
    """Seconds until a job joining the queue now starts, given the seconds left of each job in
    service and of each queued job (in order), dealt to whichever of `servers` frees first."""
    free = sorted(remaining)
    free += [0.0] * max(0, servers - len(free))
    if not free:
        free = [0.0]
    heapq.heapify(free)
    for seconds in queued:
        heapq.heappush(free, heapq.heappop(free) + seconds)
    return free[0]


class ServiceTimes:
    """The measured service rate of recent jobs, behind admission, Retry-After and the
    real-time factor reported to clients."""

    def __init__(self, window: int = 64) -> None:
        self._recent: deque[tuple[float, float, float]] = deque(maxlen=window)
        # Running sums: read on every admission.
        self._busy = 0.0
        self._audio = 0.0
        self._characters = 0.0
        self._recorded = 0
        self._warm = (0.0, 0.0, 0.0)

    def warm(self, seconds: float, audio_seconds: float, characters: float) -> None:
        """A worker's warm-up synthesis: the estimate until a job is recorded (a cold engine
        is slower, so it errs toward longer waits)."""
        busy, audio, chars = self._warm
        self._warm = (busy + seconds, audio + audio_seconds, chars + characters)

    def record(self, seconds: float, audio_seconds: float = 0.0, characters: float = 0.0) -> None:
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
        if not self._recent:
            return _DEFAULT_SERVICE_TIME
        return self._busy / len(self._recent)

    def _sums(self) -> tuple[float, float, float]:
        if self._recent and self._busy > 0:
            return self._busy, self._audio, self._characters
        return self._warm

    @property
    def rate(self) -> float:
        """Characters one worker speaks per second of its time."""
        busy, _, characters = self._sums()
        if characters > 0 and busy > 0:
            return characters / busy
        return PRIOR_CHARACTERS_PER_SECOND

    def duration(self, work: float) -> float:
        return work / self.rate

    def clone_work(self, prompt_seconds: float) -> float:
        """A cloning job's work: the characters of speaking as long as its prompt."""
        _, audio, characters = self._sums()
        per_audio_second = (
            characters / audio
            if characters > 0 and audio > 0
            else _PRIOR_CHARACTERS_PER_AUDIO_SECOND
        )
        return prompt_seconds * per_audio_second

    @property
    def real_time_factor(self) -> float | None:
        """Seconds of audio per second of work; None before any job or warm-up."""
        busy, audio, _ = self._sums()
        return audio / busy if busy > 0 and audio > 0 else None


@dataclass(eq=False)
class _Waiter(Generic[T]):
    future: asyncio.Future[T]
    work: float
    sender: Hashable
    arrival: int
    guest: bool = False  # crowded out: waits for a guest place


@dataclass(eq=False)
class _Reservation:
    key: Hashable
    work: float
    due: float
    sender: Hashable = None


@dataclass(eq=False)
class _Serving:
    work: float
    started: float
    sender: Hashable


class Admission(Generic[T]):
    """A fair queue of admitted waiters in front of interchangeable resources (the workers'
    job slots). Idle resources go lowest `rank` first, so a light load stays on a few workers
    whose engines stay warm in cache. Not thread-safe: the gateway's event loop only."""

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
        max_retry_after: float = MAX_RETRY_AFTER,
    ) -> None:
        """`share`: how many job slots share one worker's time; while anyone waits all are
        taken, so each job runs at 1/`share` of the measured rate."""
        self._queue_size = queue_size
        self._max_wait = max_wait
        self._safety_wait = safety_wait if safety_wait is not None else 10 * max_wait
        self._capacity = capacity
        self._service_times = service_times
        self._clock = clock
        self._rank = rank
        self._share = share
        self._max_retry_after = max(1.0, max_retry_after)
        self._idle: list[T] = []  # sorted by rank
        # One per worker beyond capacity, only ever handed to crowded-out senders.
        self._guest: set[T] = set()
        self._guests: list[T] = []  # idle ones
        self._waiters: list[_Waiter[T]] = []
        self._serving: dict[T, _Serving] = {}
        self._reservations: deque[_Reservation] = deque()  # by due time
        self._arrivals = itertools.count()
        # Start-time fair queueing: virtual time is the start of the work handed out last.
        self._virtual = 0.0
        self._finish: dict[Hashable, float] = {}
        self.rejected = {
            "queue_full": 0,
            "predicted_wait": 0,
            "held_for_retry": 0,
            "queue_stalled": 0,
            "pushed_out": 0,
        }

    @property
    def queued(self) -> int:
        return sum(1 for waiter in self._waiters if not waiter.future.done())

    @property
    def idle(self) -> int:
        return len(self._idle)

    @property
    def serving(self) -> int:
        return len(self._serving)

    @property
    def reserved(self) -> int:
        return len(self._reservations)

    def predicted_wait(self, sender: Hashable = None) -> float:
        """Seconds until a request from `sender` joining the queue now can expect a worker."""
        pending = self._pending()
        if self._idle and not pending:
            return 0.0
        now = self._clock()

        share = self._share()

        def duration(work: float) -> float:
            return self._service_times.duration(work) * share

        # A guest's job frees no resource a waiter could take.
        remaining = [
            max(0.0, duration(job.work) - (now - job.started))
            for resource, job in self._serving.items()
            if resource not in self._guest
        ]
        queued = [duration(waiter.work) for waiter in self._ahead_of(sender)]
        return predicted_start(remaining, queued, max(self._capacity(), len(remaining)))

    async def acquire(
        self, work: float = 1.0, retry_key: Hashable | None = None, sender: Hashable = None
    ) -> T:
        """Admit a job of `work` characters from `sender` and wait for its resource. Raises
        QueueFull when refused (at once, or later if pushed out), QueueStalled when nothing is
        served for `safety_wait`. `retry_key` identifies the request across a retry."""
        now = self._clock()
        self._expire(now)
        retrying = retry_key is not None and self._claim(retry_key, now)
        holds_back = self._holds_back(sender)
        # A retry's place was counted in the plans of all who came after it.
        keeps_places = retrying or self._keeps_reservations(now, work, holds_back)
        if self._idle and not self.queued and keeps_places:
            resource = self._idle.pop(0)
            self._hand_out(resource, work, sender, now)
            return resource
        kept = 0 if retrying else sum(1 for r in self._reservations if holds_back(r))
        waiting = self.queued + kept
        refusal = None
        if waiting >= self._queue_size and not self._push_out(sender, now):
            refusal = "queue_full"
        elif self.predicted_wait(sender) > self._max_wait:
            refusal = "predicted_wait"
        elif not keeps_places:
            refusal = "held_for_retry"
        guest = False
        if refusal is not None:
            if self._crowded_out(sender):
                if self._guests:
                    resource = self._guests.pop(0)
                    self._hand_out(resource, work, sender, now)
                    return resource
                guest = self._guest_wait(sender, work, now) <= self._max_wait
            if not guest:
                self._refuse(refusal, now, work, retry_key, sender)
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(future, work, sender, next(self._arrivals), guest)
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
            handed = future.done() and not future.cancelled() and future.exception() is None
            if not granted and handed:
                self.release(future.result())

    # --- fairness ------------------------------------------------------------------------------

    def _pending(self) -> list[_Waiter[T]]:
        return [waiter for waiter in self._waiters if not waiter.future.done()]

    def _tag(self, finish: dict[Hashable, float], virtual: float, sender: Hashable) -> float:
        """Where `sender`'s next job starts in virtual time; a sender away saves no credit."""
        return max(virtual, finish.get(sender, virtual))

    def _next(
        self, pending: list[_Waiter[T]], finish: dict[Hashable, float], virtual: float
    ) -> _Waiter[T]:
        return min(pending, key=lambda w: (self._tag(finish, virtual, w.sender), w.arrival))

    def _ahead_of(self, sender: Hashable) -> list[_Waiter[T]]:
        """The waiters served before a request from `sender` joining now, in fair order."""
        finish = dict(self._finish)
        virtual = self._virtual
        left = self._pending()
        ahead: list[_Waiter[T]] = []
        while left:
            chosen = self._next(left, finish, virtual)
            if self._tag(finish, virtual, sender) < self._tag(finish, virtual, chosen.sender):
                break
            left.remove(chosen)
            ahead.append(chosen)
            virtual = self._tag(finish, virtual, chosen.sender)
            finish[chosen.sender] = virtual + chosen.work
        return ahead

    def _hand_out(self, resource: T, work: float, sender: Hashable, now: float) -> None:
        self._serving[resource] = _Serving(work, now, sender)
        self._virtual = start = self._tag(self._finish, self._virtual, sender)
        self._finish[sender] = start + work
        self._finish = {s: f for s, f in self._finish.items() if f > start}

    def _held(self, sender: Hashable) -> int:
        """Resources, queue places and kept places `sender` holds."""
        return (
            sum(1 for job in self._serving.values() if job.sender == sender)
            + sum(1 for w in self._pending() if w.sender == sender)
            + sum(1 for r in self._reservations if r.sender == sender)
        )

    def _crowded_out(self, sender: Hashable) -> bool:
        """Whether `sender`, about to be refused and holding nothing but guest places, may
        have (or wait for) one more."""
        if not self._guest:
            return False
        if any(r not in self._guest and j.sender == sender for r, j in self._serving.items()):
            return False
        pending = self._pending()
        if any(w.sender == sender and not w.guest for w in pending):
            return False
        guests = sum(1 for r, j in self._serving.items() if r in self._guest and j.sender == sender)
        guests += sum(1 for w in pending if w.sender == sender)
        return guests < max(1, self._queue_size // len(self._senders(sender)))

    def _guest_wait(self, sender: Hashable, work: float, now: float) -> float:
        """Seconds until a guest place frees for `sender`; a guest job runs at the pace of
        its worker's time shared between senders."""
        if sum(1 for w in self._pending() if w.guest) >= self._queue_size:
            return math.inf
        slot_senders = {j.sender for r, j in self._serving.items() if r not in self._guest}
        pace = min(1 + len(slot_senders), self._share() + 1)

        def duration(work: float) -> float:
            return self._service_times.duration(work) * pace

        remaining = [
            max(0.0, duration(job.work) - (now - job.started))
            for resource, job in self._serving.items()
            if resource in self._guest
        ]
        queued = [duration(w.work) for w in self._ahead_of(sender) if w.guest]
        return predicted_start(remaining, queued, len(self._guest))

    def _senders(self, sender: Hashable) -> set[Hashable]:
        return (
            {job.sender for job in self._serving.values()}
            | {w.sender for w in self._pending()}
            | {r.sender for r in self._reservations}
            | {sender}
        )

    def _push_out(self, sender: Hashable, now: float) -> bool:
        """Make room in a full queue for `sender` by refusing the newest waiter of a sender
        over its share; whether room was made."""
        pending = self._pending()
        counts: dict[Hashable, int] = {}
        for waiter in pending:
            counts[waiter.sender] = counts.get(waiter.sender, 0) + 1
        fair = self._queue_size / max(1, len(set(counts) | {sender}))
        if not counts or counts.get(sender, 0) + 1 > fair:
            return False
        hog = max(counts, key=lambda s: counts[s])
        if counts[hog] <= fair:
            return False
        newest = max((w for w in pending if w.sender == hog), key=lambda w: w.arrival)
        self.rejected["pushed_out"] += 1
        _, start = self._plan(now, None)
        newest.future.set_exception(QueueFull(self._bounded(start)))
        return True

    # --- refusals and kept places --------------------------------------------------------------

    def _bounded(self, retry_after: float) -> float:
        return min(max(retry_after, 1.0), self._max_retry_after)

    def _refuse(
        self,
        reason: str,
        now: float,
        work: float,
        retry_key: Hashable | None,
        sender: Hashable,
    ) -> NoReturn:
        """Refuse with the start expected behind the queue and kept places, keeping a place
        for the retry when the sender may."""
        self.rejected[reason] += 1
        _, start = self._plan(now, None)
        places = sum(1 for r in self._reservations if r.sender == sender)
        share = max(1, self._queue_size // len(self._senders(sender)))
        if retry_key is None or len(self._reservations) >= self._queue_size or places >= share:
            raise QueueFull(self._bounded(start))
        # Whole seconds, as Retry-After is written, so a retry is never early; never before
        # the places kept already, which the plans assume arrive in order.
        last = self._reservations[-1].due - now if self._reservations else 0.0
        retry_after = float(max(1, math.ceil(max(start, last) - 1e-9)))
        if retry_after > self._max_retry_after:
            raise QueueFull(self._max_retry_after)
        self._reservations.append(_Reservation(retry_key, work, now + retry_after, sender))
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

    def _holds_back(self, sender: Hashable) -> Callable[[_Reservation], bool]:
        """Kept places that hold `sender` back: those of senders holding no more than it."""
        held = self._held(sender) + 1
        holding: dict[Hashable, int] = {}
        for reservation in self._reservations:
            if reservation.sender not in holding:
                holding[reservation.sender] = self._held(reservation.sender)
        return lambda reservation: holding.get(reservation.sender, 0) <= held

    def _keeps_reservations(
        self, now: float, work: float, holds_back: Callable[[_Reservation], bool]
    ) -> bool:
        if not self._reservations:
            return True
        kept, _ = self._plan(now, work, holds_back)
        return kept

    def _plan(
        self,
        now: float,
        work: float | None,
        counts: Callable[[_Reservation], bool] = lambda _: True,
    ) -> tuple[bool, float]:
        """Deal the jobs in service, the queue, `work` and the kept places to the workers as
        each frees: whether every counted place starts within `max_wait`/2 of its due time, and
        when a job behind them all starts."""
        times = self._service_times
        free = [
            max(0.0, times.duration(job.work) - (now - job.started))
            for resource, job in self._serving.items()
            if resource not in self._guest
        ]
        free += [0.0] * max(0, self._capacity() - len(free))
        if not free:
            free = [0.0]
        heapq.heapify(free)
        queued = [times.duration(w.work) for w in self._pending()]
        if work is not None:
            queued.append(times.duration(work))
        for seconds in queued:
            heapq.heappush(free, heapq.heappop(free) + seconds)
        kept = True
        for reservation in self._reservations:
            due = reservation.due - now
            start = max(heapq.heappop(free), due)
            if counts(reservation):
                kept = kept and start - max(due, 0.0) <= self._max_wait / 2
            heapq.heappush(free, start + times.duration(reservation.work))
        return kept, free[0]

    # --- resources -----------------------------------------------------------------------------

    def release(self, resource: T) -> None:
        """End `resource`'s job and give it to the next waiter in fair order, or idle it."""
        self._serving.pop(resource, None)
        pending = self._pending()
        self._waiters = pending
        if resource in self._guest:
            pending = [waiter for waiter in pending if waiter.guest]
            if not pending:
                if resource not in self._guests:
                    self._guests.append(resource)
                return
        if pending:
            waiter = self._next(pending, self._finish, self._virtual)
            self._waiters.remove(waiter)
            waiter.future.set_result(resource)
            self._hand_out(resource, waiter.work, waiter.sender, self._clock())
        else:
            bisect.insort_right(self._idle, resource, key=self._rank)

    def ending(self, resource: T) -> None:
        """`resource`'s job was cancelled: its work left drops out of the predictions."""
        if (serving := self._serving.get(resource)) is not None:
            serving.work = 0.0

    def add_guest(self, resource: T) -> None:
        self._guest.add(resource)
        self.release(resource)

    def withdraw(self, resource: T) -> bool:
        """Take `resource` back if it is idle; whether it was."""
        if resource in self._idle:
            self._idle.remove(resource)
            return True
        return False

    def discard(self, resource: T) -> None:
        """Forget a resource that is going away (a worker died or restarts)."""
        self._serving.pop(resource, None)
        if resource in self._idle:
            self._idle.remove(resource)
        if resource in self._guests:
            self._guests.remove(resource)
        self._guest.discard(resource)
