from __future__ import annotations

import asyncio

import pytest

from speechgate.errors import QueueFull, QueueTimeout
from speechgate.workers.admission import Admission, ServiceTimes


def make(queue_size: int = 2, max_wait: float = 5.0, capacity: int = 1) -> Admission[str]:
    times = ServiceTimes()
    times.record(2.0)
    times.record(4.0)  # mean 3 s
    return Admission(queue_size, max_wait, lambda: capacity, times)


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


def test_waiters_are_served_in_arrival_order() -> None:
    async def scenario() -> list[str]:
        admission = make(queue_size=3)
        order: list[str] = []

        async def request(name: str) -> None:
            await admission.acquire()
            order.append(name)

        tasks = [asyncio.create_task(request(name)) for name in ("a", "b", "c")]
        await asyncio.sleep(0)  # let all three queue
        assert admission.queued == 3
        for _ in tasks:
            admission.release("worker")
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["a", "b", "c"]


def test_full_queue_is_refused_with_a_retry_estimate() -> None:
    async def scenario() -> QueueFull:
        admission = make(queue_size=2, capacity=2)
        waiting = [asyncio.create_task(admission.acquire()) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(QueueFull) as refused:
            await admission.acquire()
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        return refused.value

    error = asyncio.run(scenario())
    # Third in line, two workers, 3 s per job: about 4.5 s.
    assert error.retry_after == pytest.approx(4.5)
    assert error.status_code == 429
    assert error.headers == {"Retry-After": "5", "retry-after-ms": "4500"}


def test_zero_queue_refuses_whenever_busy() -> None:
    async def scenario() -> None:
        admission = make(queue_size=0)
        with pytest.raises(QueueFull):
            await admission.acquire()

    asyncio.run(scenario())


def test_waiting_too_long_is_a_503_with_retry_after() -> None:
    async def scenario() -> None:
        admission = make(max_wait=0.01)
        with pytest.raises(QueueTimeout) as timed_out:
            await admission.acquire()
        assert timed_out.value.status_code == 503
        assert int(timed_out.value.headers["Retry-After"]) >= 1
        assert admission.queued == 0

    asyncio.run(scenario())


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
