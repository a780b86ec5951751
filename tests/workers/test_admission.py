from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from speechgate.errors import QueueFull, QueueStalled
from speechgate.workers.admission import (
    PRIOR_CHARACTERS_PER_SECOND,
    RETRY_GRACE,
    Admission,
    ServiceTimes,
    predicted_start,
)
from tests.helpers.clock import Clock, run_on, settle


def at_once(acquire: Coroutine[Any, Any, object]) -> BaseException:
    """What `acquire` raises without ever suspending: refused at once, not after a wait."""
    try:
        acquire.send(None)
    except BaseException as error:
        return error
    acquire.close()
    raise AssertionError("the request was queued, not refused at once")


def ten_characters_a_second() -> ServiceTimes:
    times = ServiceTimes()
    times.record(2.0, 2.0, 20)  # measured: 10 characters per second of a worker
    return times


def make(
    queue_size: int = 8,
    max_wait: float = 5.0,
    capacity: int = 1,
    clock: Clock | None = None,
    times: ServiceTimes | None = None,
    max_retry_after: float = 60.0,
) -> Admission[str]:
    return Admission(
        queue_size,
        max_wait,
        lambda: capacity,
        times or ten_characters_a_second(),
        clock or Clock(),
        max_retry_after=max_retry_after,
    )


def test_the_work_ahead_is_dealt_to_the_workers_as_each_frees() -> None:
    assert predicted_start([], [], 2) == 0.0  # idle workers
    assert predicted_start([3.0], [], 2) == 0.0  # one still idle
    assert predicted_start([3.0, 1.0], [], 2) == 1.0
    # The queued 4 s job takes the worker free at 1 s; the next one frees at 3 s.
    assert predicted_start([3.0, 1.0], [4.0], 2) == 3.0
    assert predicted_start([2.0], [1.0, 1.0], 1) == 4.0
    assert predicted_start([0.5, 0.5], [1.0, 1.0, 1.0], 2) == 1.5  # third queued: 1.5 to 2.5


def test_the_service_rate_is_measured_in_characters_per_worker_second() -> None:
    times = ServiceTimes()
    assert times.rate == PRIOR_CHARACTERS_PER_SECOND  # before any job, the cautious prior
    assert times.duration(150) == pytest.approx(150 / PRIOR_CHARACTERS_PER_SECOND)
    times.record(2.0, 10.0, 100)
    times.record(2.0, 10.0, 300)
    assert times.rate == pytest.approx(100.0)
    assert times.duration(250) == pytest.approx(2.5)
    # A cloning job's prompt counts as the characters of as much speech: 20 per second here.
    assert times.clone_work(3.0) == pytest.approx(60.0)


def test_a_prediction_is_the_rest_of_the_jobs_running_then_the_queue() -> None:
    clock = Clock()

    async def scenario() -> list[float]:
        admission = make(clock=clock, max_wait=30)
        admission.release("w")
        await admission.acquire(40)  # 4 s of work from t = 0
        predictions = [admission.predicted_wait()]
        waiting = asyncio.create_task(admission.acquire(20))  # 2 s more
        await settle()
        predictions.append(admission.predicted_wait())
        clock.advance(1.5)
        predictions.append(admission.predicted_wait())
        waiting.cancel()
        return predictions

    assert run_on(clock, scenario) == pytest.approx([4.0, 6.0, 4.5])


def test_slots_that_share_a_worker_each_run_at_their_share_of_its_rate() -> None:
    clock = Clock()

    async def scenario() -> list[float]:
        # One worker, two slots: its two jobs each get half of its 10 characters a second.
        admission = Admission(8, 30, lambda: 2, ten_characters_a_second(), clock, share=lambda: 2)
        admission.release("slot 1")
        admission.release("slot 2")
        await admission.acquire(40)  # 8 s at half the rate, from t = 0
        clock.advance(1.0)
        await admission.acquire(20)  # 4 s at half the rate, from t = 1
        predictions = [admission.predicted_wait()]
        waiting = asyncio.create_task(admission.acquire(10))
        await settle()
        predictions.append(admission.predicted_wait())
        waiting.cancel()
        return predictions

    # The second job frees its slot at 5 s (4 s from now); the queued one takes it for 2 s,
    # and the first frees its slot at 8 s (7 s from now).
    assert run_on(clock, scenario) == pytest.approx([4.0, 6.0])


def test_a_long_text_queued_ahead_makes_a_later_request_wait_longer() -> None:
    def prediction_behind(text_ahead: int) -> float:
        async def scenario() -> float:
            admission = make(max_wait=1000)
            admission.release("w")
            await admission.acquire(10)
            ahead = asyncio.create_task(admission.acquire(text_ahead))
            await settle()
            wait = admission.predicted_wait()
            ahead.cancel()
            return wait

        return run_on(Clock(), scenario)

    assert prediction_behind(30) == pytest.approx(1.0 + 3.0)
    assert prediction_behind(4000) == pytest.approx(1.0 + 400.0)


def test_a_cancelled_job_holds_its_resource_but_no_work_in_the_predictions() -> None:
    # A client that abandons a long stream and asks again at once is admitted: the worker is
    # still ending the job, but only for a step.
    async def scenario() -> tuple[float, float, str]:
        admission = make(max_wait=5.0)
        admission.release("w")
        await admission.acquire(400)  # 40 s of work
        before = admission.predicted_wait()
        admission.ending("w")
        after = admission.predicted_wait()
        again = asyncio.create_task(admission.acquire(400))
        await settle()
        admission.release("w")  # the worker's Done(cancelled)
        return before, after, await again

    before, after, granted = run_on(Clock(), scenario)
    assert before == pytest.approx(40.0)
    assert after == 0.0
    assert granted == "w"


def test_a_request_predicted_to_wait_too_long_is_refused_at_once_with_the_prediction() -> None:
    async def scenario() -> tuple[BaseException, int, dict[str, int]]:
        admission = make(max_wait=5.0)
        admission.release("w")
        await admission.acquire(40)  # 4 s
        ahead = asyncio.create_task(admission.acquire(20))  # admitted: 4 s to wait
        await settle()
        refused = at_once(admission.acquire(10))  # would wait 6 s
        queued = admission.queued
        ahead.cancel()
        return refused, queued, admission.rejected

    refused, queued, rejected = run_on(Clock(), scenario)
    assert isinstance(refused, QueueFull)
    assert refused.retry_after == pytest.approx(6.0)
    assert refused.status_code == 429
    assert refused.headers == {"Retry-After": "6", "retry-after-ms": "6000"}
    assert queued == 1  # the refused one never joined
    assert rejected["predicted_wait"] == 1


def test_a_retry_after_the_predicted_delay_is_admitted() -> None:
    clock = Clock()

    async def scenario() -> str:
        admission = make(max_wait=5.0, clock=clock)
        admission.release("w")
        await admission.acquire(40)  # a: 4 s
        b = asyncio.create_task(admission.acquire(20))  # 2 s, starts at 4 s
        await settle()
        refused = at_once(admission.acquire(30))
        assert isinstance(refused, QueueFull)
        retry_at = clock() + refused.retry_after
        # The jobs ahead run as predicted; a newcomer arrives meanwhile.
        clock.advance(4.0)
        admission.release("w")  # a done: b starts
        await b
        d = asyncio.create_task(admission.acquire(30))  # admitted behind b: 2 s
        await settle()
        clock.advance(retry_at - clock())
        admission.release("w")  # b done: d starts, 3 s
        await d
        retried = asyncio.create_task(admission.acquire(30))
        await settle()
        assert admission.predicted_wait() > 0  # it waits behind d...
        admission.release("w")
        return await retried  # ...and is served

    assert run_on(clock, scenario) == "w"


def test_before_any_measurement_the_prior_and_the_count_bound_both_apply() -> None:
    async def scenario() -> tuple[BaseException, BaseException]:
        admission = make(queue_size=1, max_wait=30.0, times=ServiceTimes())
        admission.release("w")
        # 300 characters at the prior's real-time speed: 20 s.
        await admission.acquire(300)
        waiting = asyncio.create_task(admission.acquire(1))
        await settle()
        full = at_once(admission.acquire(1))  # predicted in time, but the queue holds one
        waiting.cancel()
        await settle()
        admission.release("w")
        await admission.acquire(600)  # 40 s of work ahead, by the prior
        too_long = at_once(admission.acquire(1))
        return full, too_long

    full, too_long = run_on(Clock(), scenario)
    assert isinstance(full, QueueFull)
    assert full.retry_after == pytest.approx(300 / PRIOR_CHARACTERS_PER_SECOND + 1 / 15)
    assert isinstance(too_long, QueueFull)
    assert too_long.retry_after == pytest.approx(600 / PRIOR_CHARACTERS_PER_SECOND)


def test_zero_queue_refuses_whenever_busy() -> None:
    async def scenario() -> BaseException:
        return at_once(make(queue_size=0).acquire())

    assert isinstance(run_on(Clock(), scenario), QueueFull)


def test_an_admitted_request_waits_past_max_wait_when_service_is_slower_than_predicted() -> None:
    clock = Clock()

    async def scenario() -> str:
        admission = make(max_wait=5.0, clock=clock)
        admission.release("w")
        await admission.acquire(10)  # predicted 1 s
        waiting = asyncio.create_task(admission.acquire(10))
        await settle()
        # The job ahead takes 40 times longer than predicted: eight max_waits.
        for _ in range(40):
            clock.advance(1.0)
            await settle()
        assert not waiting.done()
        admission.release("w")
        return await waiting

    assert run_on(clock, scenario) == "w"


def test_only_a_pool_that_serves_nobody_for_the_safety_wait_answers_503() -> None:
    clock = Clock()

    async def scenario() -> tuple[QueueStalled, int]:
        admission: Admission[str] = Admission(
            8, 5.0, lambda: 1, ten_characters_a_second(), clock, safety_wait=600
        )
        admission.release("w")
        await admission.acquire(10)
        waiting = asyncio.create_task(admission.acquire(10))
        await settle()
        clock.advance(599)
        await settle()
        assert not waiting.done()
        clock.advance(2)
        await settle()
        with pytest.raises(QueueStalled) as stalled:
            await waiting
        return stalled.value, admission.queued

    stalled, queued = run_on(clock, scenario)
    assert stalled.status_code == 503
    assert stalled.code == "queue_stalled"
    assert int(stalled.headers["Retry-After"]) == 5
    assert queued == 0


def test_idle_resource_is_handed_out_at_once() -> None:
    async def scenario() -> str:
        admission = make()
        admission.release("w1")
        return await admission.acquire()

    assert asyncio.run(scenario()) == "w1"


def test_idle_resources_go_out_lowest_rank_first() -> None:
    async def scenario() -> list[int]:
        times = ServiceTimes()
        admission: Admission[int] = Admission(2, 5.0, lambda: 3, times, rank=lambda w: w)
        for worker in (2, 0, 1):
            admission.release(worker)
        first = await admission.acquire()
        admission.release(first)  # back in its place: a light load stays on worker 0
        return [await admission.acquire() for _ in range(3)]

    assert asyncio.run(scenario()) == [0, 1, 2]


def test_admitted_waiters_are_served_in_arrival_order_whatever_their_size() -> None:
    async def scenario() -> list[str]:
        admission = make(max_wait=1000)
        admission.release("worker")
        await admission.acquire(10)
        order: list[str] = []

        async def request(name: str, work: float) -> None:
            await admission.acquire(work)
            order.append(name)

        tasks = [
            asyncio.create_task(request(name, work))
            for name, work in (("long", 4000), ("short", 5), ("medium", 100))
        ]
        await settle()
        assert admission.queued == 3
        for _ in range(4):
            admission.release("worker")
            await settle()
        await asyncio.gather(*tasks)
        return order

    assert run_on(Clock(), scenario) == ["long", "short", "medium"]


def test_a_cancelled_waiter_leaves_the_queue_and_never_gets_a_resource() -> None:
    async def scenario() -> str:
        admission = make()
        gone = asyncio.create_task(admission.acquire())
        stays = asyncio.create_task(admission.acquire())
        await asyncio.sleep(0)
        gone.cancel()
        await asyncio.gather(gone, return_exceptions=True)
        admission.release("worker")
        return await stays

    assert asyncio.run(scenario()) == "worker"


def test_a_resource_granted_as_the_waiter_is_cancelled_is_passed_on() -> None:
    async def scenario() -> str:
        admission = make()
        first = asyncio.create_task(admission.acquire())
        second = asyncio.create_task(admission.acquire())
        await asyncio.sleep(0)
        admission.release("worker")  # granted to `first`...
        first.cancel()  # ...which is cancelled before it resumes
        await asyncio.gather(first, return_exceptions=True)
        return await second

    assert asyncio.run(scenario()) == "worker"


def test_service_time_is_a_rolling_mean() -> None:
    times = ServiceTimes(window=2)
    assert times.mean == 1.0  # before any job, a default
    for seconds in (10.0, 2.0, 4.0):
        times.record(seconds)
    assert times.mean == 3.0


def test_the_real_time_factor_covers_the_window_only() -> None:
    times = ServiceTimes(window=3)
    assert times.real_time_factor is None  # before any job
    for seconds, audio in [(1.0, 100.0), (0.5, 5.0), (0.25, 2.5), (0.25, 2.5), (0.1, 0.3)]:
        times.record(seconds, audio)
    # The last three jobs: 5.3 s of audio in 0.6 s, the first two forgotten.
    assert times.real_time_factor == pytest.approx(5.3 / 0.6)
    assert times.mean == pytest.approx(0.2)


class _Line:
    """One worker at 10 characters a second, served exactly as predicted, with requests
    arriving on a fake clock: who was admitted, when each started, who was refused."""

    def __init__(self, clock: Clock, max_wait: float = 5.0) -> None:
        self.clock = clock
        self.admission = make(max_wait=max_wait, clock=clock)
        self.admission.release("w")
        self.started: list[tuple[str, float, float]] = []  # name, arrived, started
        self.refused: dict[str, QueueFull] = {}
        self.requests: list[asyncio.Task[None]] = []

    def arrive(self, name: str, work: float, key: str | None = None) -> None:
        arrived = self.clock()

        async def request() -> None:
            try:
                worker = await self.admission.acquire(work, key)
            except QueueFull as error:
                self.refused[name] = error
                return
            self.started.append((name, arrived, self.clock()))
            await asyncio.sleep(work / 10)
            self.admission.release(worker)

        self.requests.append(asyncio.create_task(request()))

    async def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await settle()


def test_a_retry_at_retry_after_is_admitted_while_fresh_requests_keep_arriving() -> None:
    clock = Clock()

    async def scenario() -> _Line:
        line = _Line(clock)
        line.arrive("a", 40)  # 4 s in service
        line.arrive("b", 20)  # 2 s queued: starts at 4 s
        await settle()
        line.arrive("carol", 30, key="carol")  # would wait 6 s: refused
        await settle()
        retry_at = line.refused["carol"].retry_after
        # A fresh 1 s request every half second: on its own it would keep the queue at
        # max_wait, so whoever comes back finds the place taken.
        for step in range(1, 41):
            await line.tick(0.5)
            line.arrive(f"fresh {step}", 10, key=f"fresh {step}")
            if clock() == retry_at:
                line.arrive("carol again", 30, key="carol")
            await settle()
        return line

    line = run_on(clock, scenario)
    started = {name for name, _, _ in line.started}
    assert "carol" in line.refused
    assert "carol again" in started
    # Fresh requests still got in around the reserved place, and every admitted request
    # started within max_wait, in the order it arrived.
    assert len(started - {"a", "b", "carol again"}) >= 10
    assert all(begun - arrived <= 5.0 for _, arrived, begun in line.started)
    assert [arrived for _, arrived, _ in line.started] == sorted(
        arrived for _, arrived, _ in line.started
    )


def test_a_kept_place_is_bounded_and_expires_unless_its_sender_comes_back_when_due() -> None:
    clock = Clock()

    async def scenario() -> None:
        admission = make(queue_size=2, max_wait=5.0, clock=clock)
        admission.release("w")
        await admission.acquire(40)  # 4 s in service
        ahead = asyncio.create_task(admission.acquire(20))  # starts at 4 s
        await settle()
        refused = [at_once(admission.acquire(10, key)) for key in ("x", "y", "z")]
        # Whole seconds, each behind the places kept before it.
        assert [getattr(error, "retry_after", None) for error in refused] == [6.0, 7.0, 8.0]
        assert admission.reserved == 2  # z's found no room: at most queue_size places
        # Before its due time, x's key is a new request, not the retry the place is for.
        clock.advance(1.0)
        assert isinstance(at_once(admission.acquire(10, "x")), QueueFull)
        assert admission.reserved == 2  # ...refused with no room for a third place
        clock.advance(RETRY_GRACE + 6.5)  # past both places' grace: nobody came back
        admission.release("w")
        await ahead
        admission.release("w")
        assert await admission.acquire(30) == "w"  # a fresh request takes the idle worker
        assert admission.reserved == 0

    run_on(clock, scenario)


class _Flood:
    """One worker speaking 40 characters a second on a fake clock, timed from its first job
    on (as the pool times its jobs): sender A's `loops` send 10 s texts back to back, each
    retrying a refusal at its Retry-After; sender B sends a 1 s text every `every` seconds and
    gives up when refused."""

    def __init__(self, clock: Clock, loops: int = 3, every: float = 5.0) -> None:
        self.clock = clock
        self.times = ServiceTimes()
        self.admission = make(
            queue_size=16, max_wait=30.0, clock=clock, times=self.times, max_retry_after=30.0
        )
        self.admission.release("w")
        self.loops = loops
        self.every = every
        self.served: dict[str, int] = {"A": 0, "B": 0}
        self.refused: dict[str, int] = {"A": 0, "B": 0}
        self.retry_after: list[float] = []

    async def _request(self, sender: str, key: str, work: float) -> bool:
        try:
            worker = await acquire_from(self.admission, work, key, sender)
        except QueueFull as error:
            self.refused[sender] += 1
            self.retry_after.append(error.retry_after)
            return False
        self.served[sender] += 1
        try:
            await asyncio.sleep(work / 40)
            self.times.record(work / 40, work / 15, work)
        finally:
            self.admission.release(worker)
        return True

    async def _loop(self, index: int) -> None:
        while True:
            if not await self._request("A", f"A text {index}", 400):
                await asyncio.sleep(self.retry_after[-1])

    async def run(self, seconds: float) -> None:
        loops = [asyncio.create_task(self._loop(index)) for index in range(self.loops)]
        await settle()
        b: list[asyncio.Task[bool]] = []
        for step in range(int(seconds / self.every)):
            b.append(asyncio.create_task(self._request("B", f"B text {step}", 40)))
            for _ in range(int(self.every * 10)):
                self.clock.advance(0.1)
                await settle()
        for task in loops:
            task.cancel()
        while not all(task.done() for task in b):  # B's last requests, admitted, are served
            self.clock.advance(0.1)
            await settle()


def acquire_from(
    admission: Admission[str], work: float, key: str, sender: str
) -> Coroutine[Any, Any, str]:
    return admission.acquire(work, (sender, key), sender=sender)


def test_a_sender_looping_on_refusals_cannot_lock_another_out() -> None:
    clock = Clock()

    async def scenario() -> _Flood:
        flood = _Flood(clock)
        await flood.run(300.0)
        return flood

    flood = run_on(clock, scenario)
    attempts = flood.served["B"] + flood.refused["B"]
    assert attempts == 60
    assert flood.served["B"] >= 0.9 * attempts
    assert flood.served["A"] > 0  # the flood is still served, at its share
    assert max(flood.retry_after) <= 30.0


def test_a_sender_keeps_at_most_its_share_of_the_places_and_none_beyond_the_bound() -> None:
    clock = Clock()

    async def scenario() -> None:
        admission = make(queue_size=4, max_wait=5.0, clock=clock, max_retry_after=20.0)
        admission.release("w")
        await admission.acquire(40, sender="A")  # 4 s in service
        ahead = asyncio.create_task(admission.acquire(20, sender="A"))  # starts at 4 s
        await settle()
        refused = [at_once(admission.acquire(10, ("A", n), sender="A")) for n in range(4)]
        # A and nobody else: every place is A's to keep.
        assert admission.reserved == 4
        assert all(isinstance(error, QueueFull) for error in refused)
        # B, holding nothing, is not held back for A's places: B is admitted ahead of them.
        b = asyncio.create_task(admission.acquire(10, ("B", 0), sender="B"))
        await settle()
        assert admission.queued == 2
        # 4 s behind A's job in service and 1 s in B's turn before A's queued one.
        assert admission.predicted_wait("C") == pytest.approx(5.0)
        # A long text ahead: every refusal is told at most the bound, and keeps no place.
        await asyncio.sleep(0)
        long = at_once(admission.acquire(1000, ("A", 9), sender="A"))
        assert isinstance(long, QueueFull)
        assert long.retry_after <= 20.0
        ahead.cancel()
        b.cancel()

    run_on(clock, scenario)


def test_a_full_queue_refuses_the_sender_holding_most_of_it_first() -> None:
    async def scenario() -> tuple[BaseException, list[str]]:
        admission = make(queue_size=3, max_wait=60.0)
        admission.release("w")
        await admission.acquire(10, sender="A")
        flood = [asyncio.create_task(admission.acquire(10, sender="A")) for _ in range(3)]
        await settle()
        assert admission.queued == 3
        # B waits for nothing: the newest of A's three makes room for it.
        b = asyncio.create_task(admission.acquire(10, sender="B"))
        await settle()
        pushed_out = flood[2].exception()
        assert admission.rejected["pushed_out"] == 1
        # A third sender pushes out A's next; then each holds its share, and a fourth is
        # refused.
        c = asyncio.create_task(admission.acquire(10, sender="C"))
        await settle()
        assert isinstance(flood[1].exception(), QueueFull)
        refused = at_once(admission.acquire(10, sender="D"))
        order: list[str] = []
        for name, task in [("A1", flood[0]), ("B", b), ("C", c)]:
            task.add_done_callback(lambda _, name=name: order.append(name))
        for _ in range(3):
            admission.release("w")
            await settle()
        assert isinstance(refused, QueueFull)
        assert pushed_out is not None
        return pushed_out, order

    pushed_out, order = run_on(Clock(), scenario)
    assert isinstance(pushed_out, QueueFull)
    assert order == ["B", "C", "A1"]  # A has been served already: the others go first


def test_a_sender_crowded_out_gets_the_guest_place_or_waits_for_it_in_turn() -> None:
    async def scenario() -> tuple[str, BaseException, BaseException, list[str]]:
        admission = make(max_wait=5.0)  # 10 characters a second
        admission.release("w")
        admission.add_guest("guest")
        await admission.acquire(400, sender="A")  # 40 s in service: far beyond max_wait
        # A again: it holds the worker already, so it is refused, not made a guest.
        a = at_once(admission.acquire(10, sender="A"))
        b = await admission.acquire(10, sender="B")
        # The guest place is taken: the crowded out wait for it (each job 2 s at a guest's
        # pace, half the worker beside A's job), C before B's second (B has had its turn).
        order: list[str] = []
        waiting = {
            name: asyncio.create_task(admission.acquire(10, sender=name[0]))
            for name in ("C", "B2", "D")
        }
        for name, task in waiting.items():
            task.add_done_callback(lambda _, name=name: order.append(name))
        await settle()
        assert admission.queued == 3
        # E would wait for B's, C's and D's guest jobs: 6 s, beyond max_wait.
        e = at_once(admission.acquire(10, sender="E"))
        for _ in range(3):
            admission.release("guest")
            await settle()
        return b, a, e, order

    b, a, e, order = run_on(Clock(), scenario)
    assert b == "guest"
    assert isinstance(a, QueueFull)
    assert isinstance(e, QueueFull)
    assert order == ["C", "D", "B2"]


class _SharedWorker:
    """One worker with one slot and a guest place on a fake clock, speaking `rate` characters
    a second shared as a worker shares its steps: equally between the senders of its jobs, a
    sender's part equally between its jobs."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.jobs: list[tuple[str, list[float], asyncio.Future[None]]] = []

    async def run(self, sender: str, work: float) -> None:
        done = asyncio.get_running_loop().create_future()
        self.jobs.append((sender, [work], done))
        await done

    def advance(self, seconds: float) -> None:
        senders = [sender for sender, _, _ in self.jobs]
        for sender, left, done in list(self.jobs):
            left[0] -= self.rate * seconds / len(set(senders)) / senders.count(sender)
            if left[0] <= 0:
                self.jobs.remove((sender, left, done))
                done.set_result(None)


class _GuestFlood:
    """The flood of bench/fairness.py on a fake clock: sender A's 4 loops send texts that take
    the worker ~100 s each (far beyond `max_wait`), each retrying a refusal at its Retry-After;
    sender B sends a 5 s text (at half the worker) every 4 or 8 s, in turn, and gives up when
    refused."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.times = ServiceTimes()
        self.times.record(1.0, 1.0, 40)  # 40 characters a second
        self.worker = _SharedWorker(40.0)
        self.admission = make(
            queue_size=16, max_wait=30.0, clock=clock, times=self.times, max_retry_after=30.0
        )
        self.admission.release("w")
        self.admission.add_guest("guest")
        self.served: dict[str, int] = {"A": 0, "B": 0}
        self.refused: dict[str, int] = {"A": 0, "B": 0}
        self.retry_after: list[float] = []

    async def _request(self, sender: str, key: str, work: float) -> bool:
        try:
            resource = await acquire_from(self.admission, work, key, sender)
        except QueueFull as error:
            self.refused[sender] += 1
            self.retry_after.append(error.retry_after)
            return False
        self.served[sender] += 1
        try:
            await self.worker.run(sender, work)
            self.times.record(work / 40, work / 15, work)
        finally:
            self.admission.release(resource)
        return True

    async def _loop(self, index: int) -> None:
        while True:
            if not await self._request("A", f"A text {index}", 3900):
                await asyncio.sleep(self.retry_after[-1])

    async def run(self, seconds: float) -> None:
        loops = [asyncio.create_task(self._loop(index)) for index in range(4)]
        await settle()
        b: list[asyncio.Task[bool]] = []
        while self.clock() < seconds:
            b.append(asyncio.create_task(self._request("B", f"B text {len(b)}", 100)))
            for _ in range(40 if len(b) % 2 else 80):
                self.clock.advance(0.1)
                self.worker.advance(0.1)
                await settle()
        for task in loops:
            task.cancel()
        while not all(task.done() for task in b):  # B's last requests, admitted, are served
            self.clock.advance(0.1)
            self.worker.advance(0.1)
            await settle()


def test_a_sender_crowded_out_by_jobs_longer_than_max_wait_is_served() -> None:
    clock = Clock()

    async def scenario() -> _GuestFlood:
        flood = _GuestFlood(clock)
        await flood.run(300.0)
        return flood

    flood = run_on(clock, scenario)
    attempts = flood.served["B"] + flood.refused["B"]
    assert attempts > 45
    assert flood.served["B"] >= 0.9 * attempts, (flood.served, flood.refused)
    assert flood.served["A"] > 0  # the flood is still served, at its share
    assert max(flood.retry_after) <= 30.0
