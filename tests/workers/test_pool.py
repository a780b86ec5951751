"""The worker pool with real engine processes."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest

from speechgate.audio.formats import AudioFormat
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.errors import EngineFailed, QueueFull, SlowReader, WorkerLost
from speechgate.pipeline import OutputSpec
from speechgate.workers.admission import PRIOR_CHARACTERS_PER_SECOND
from speechgate.workers.cores import SharedCores
from speechgate.workers.pool import StartupError, WorkerPool, WorkerState, _Job, assign_cpus
from tests.helpers.clock import Clock
from tests.helpers.waiting import until

pytestmark = pytest.mark.slow

T = TypeVar("T")
PCM = OutputSpec(AudioFormat.PCM, 24000)
SHORT = SynthesisRequest("One sentence of speech.", "en-us")
MEDIUM = SynthesisRequest(" ".join(f"This is sentence number {n}." for n in range(30)), "en-us")
LONG = SynthesisRequest(" ".join(f"This is sentence number {n}." for n in range(300)), "en-us")


def run_with_pool(
    scenario: Callable[[WorkerPool], Awaitable[T]],
    *,
    config: EngineConfig | None = None,
    workers: int = 2,
    job_timeout: float = 60.0,
    slow_reader_timeout: float = 60.0,
    max_queue_wait: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    async def main() -> T:
        pool = WorkerPool(
            config or EngineConfig("espeak"),
            workers,
            queue_size=8,
            max_queue_wait=max_queue_wait,
            job_timeout=job_timeout,
            slow_reader_timeout=slow_reader_timeout,
            clock=clock,
        )
        await pool.start()
        try:
            return await scenario(pool)
        finally:
            await pool.close()

    return asyncio.run(main())


async def collect(chunks: AsyncIterator[object]) -> int:
    return sum([1 async for _ in chunks])


def test_cpus_are_spread_one_block_per_worker() -> None:
    assert assign_cpus(2, 1, [0, 1]) == [(0,), (1,)]
    assert assign_cpus(1, 2, [0, 1]) == [(0, 1)]
    assert assign_cpus(3, 1, [4, 5]) == [(4,), (5,), (4,)]


def test_concurrent_jobs_up_to_the_worker_count_all_succeed() -> None:
    async def scenario(pool: WorkerPool) -> list[int]:
        counts = await asyncio.gather(*(collect(pool.synthesize(SHORT, PCM)) for _ in range(2)))
        stats = pool.stats()
        assert stats.jobs["completed"] == 2
        assert stats.in_flight == 0
        return counts

    assert all(count >= 2 for count in run_with_pool(scenario))


def test_workers_are_pinned_to_their_own_cores() -> None:
    async def scenario(pool: WorkerPool) -> list[set[int]]:
        return [os.sched_getaffinity(pid) for pid in pool.worker_pids()]

    affinities = run_with_pool(scenario)
    cores = sorted(os.sched_getaffinity(0))
    assert affinities == [{cores[0]}, {cores[1 % len(cores)]}]


def test_a_killed_worker_ends_its_stream_and_comes_back() -> None:
    async def scenario(pool: WorkerPool) -> None:
        (pid,) = pool.worker_pids()
        chunks = pool.synthesize(LONG, PCM)
        await anext(chunks)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(WorkerLost):
            await collect(chunks)
        await until(lambda: pool.stats().workers[WorkerState.IDLE] == 1)
        stats = pool.stats()
        assert (stats.restarts, stats.jobs["lost"], stats.in_flight) == (1, 1, 0)
        assert pool.worker_pids() != [pid]
        assert await collect(pool.synthesize(SHORT, PCM)) >= 2

    run_with_pool(scenario, workers=1)


def test_a_stuck_job_is_killed_after_the_job_timeout() -> None:
    async def scenario(pool: WorkerPool) -> None:
        with pytest.raises(EngineFailed) as failed:
            await collect(pool.synthesize(LONG, PCM))
        assert failed.value.code == "job_timeout"
        await until(lambda: pool.stats().workers[WorkerState.IDLE] == 1)
        assert (pool.stats().restarts, pool.stats().in_flight) == (1, 0)

    # espeak speaks LONG in about a quarter of a second; a millisecond is far too short.
    run_with_pool(scenario, workers=1, job_timeout=0.001)


def test_an_engine_that_cannot_load_fails_the_start() -> None:
    async def scenario(pool: WorkerPool) -> None:
        raise AssertionError("unreachable")

    with pytest.raises(StartupError, match="nonexistent"):
        run_with_pool(
            scenario, config=EngineConfig("piper", options={"model": "/nonexistent.onnx"})
        )


def test_a_slow_consumer_pauses_the_worker_instead_of_buffering_everything() -> None:
    async def scenario(pool: WorkerPool) -> None:
        chunks = pool.synthesize(LONG, PCM)
        first = await anext(chunks)
        # espeak speaks all of LONG in well under a second when nothing holds it back; with
        # nobody reading, the worker must stay paused with only a few chunks buffered.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await until(lambda: pool.stats().jobs["completed"] == 1)
        assert pool.stats().in_flight == 1
        rest = [chunk async for chunk in chunks]
        assert pool.stats().jobs["completed"] == 1
        assert sum(c.audio_seconds for c in [first, *rest]) > 60  # all of it, in the end

    run_with_pool(scenario, workers=1)


def test_time_paused_for_a_slow_reader_does_not_count_against_the_job_timeout() -> None:
    async def scenario(pool: WorkerPool) -> None:
        chunks = pool.synthesize(MEDIUM, PCM)
        first = await anext(chunks)
        # Nobody reads for longer than the whole job may take: the worker waits, paused
        # (more chunks than the inbox holds are ready), and that wait is not synthesis.
        await asyncio.sleep(2.5)
        rest = [chunk async for chunk in chunks]
        assert sum(c.audio_seconds for c in [first, *rest]) > 10
        assert pool.stats().restarts == 0

    # espeak speaks MEDIUM in a few hundredths of a second when nobody holds it back.
    run_with_pool(scenario, workers=1, job_timeout=2.0)


def test_a_reader_that_reads_nothing_for_too_long_loses_its_job() -> None:
    async def scenario(pool: WorkerPool) -> None:
        chunks = pool.synthesize(LONG, PCM)
        await anext(chunks)
        await until(lambda: pool.stats().jobs["cancelled"] == 1)
        assert pool.stats().in_flight == 0  # the worker is free for others at once
        with pytest.raises(SlowReader):
            async for _ in chunks:
                pass
        assert await collect(pool.synthesize(SHORT, PCM)) >= 2
        assert pool.stats().restarts == 0

    run_with_pool(scenario, workers=1, slow_reader_timeout=0.3)


def test_completed_jobs_measure_the_service_rate_in_characters() -> None:
    async def scenario(pool: WorkerPool) -> float:
        assert pool.service_times.rate == PRIOR_CHARACTERS_PER_SECOND
        await collect(pool.synthesize(MEDIUM, PCM))
        return pool.service_times.rate

    # espeak speaks hundreds of times faster than real time, far above the real-time prior.
    assert run_with_pool(scenario, workers=1) > 10 * PRIOR_CHARACTERS_PER_SECOND


def test_a_request_behind_too_much_work_is_refused_at_once_and_the_admitted_are_served() -> None:
    # The clock stands still, so the predictions are exact: 10 characters a second, measured.
    async def scenario(pool: WorkerPool) -> None:
        pool.service_times.record(1.0, 1.0, 10)
        running = pool.synthesize(LONG, PCM)  # held: nobody reads beyond its first chunk
        await anext(running)
        queued = asyncio.create_task(collect(pool.synthesize(MEDIUM, PCM)))
        await until(lambda: pool.stats().queued == 1)  # predicted start: LONG's 859 s
        with pytest.raises(QueueFull) as refused:
            await anext(pool.synthesize(SHORT, PCM))
        assert refused.value.retry_after == pytest.approx((len(LONG.text) + len(MEDIUM.text)) / 10)
        assert pool.stats().queued == 1
        await collect(running)
        assert await queued >= 2
        stats = pool.stats()
        assert stats.rejected == {
            "queue_full": 0,
            "predicted_wait": 1,
            "held_for_retry": 0,
            "queue_stalled": 0,
        }
        assert stats.jobs["completed"] == 2

    assert len(LONG.text) / 10 < 900 < (len(LONG.text) + len(MEDIUM.text)) / 10
    run_with_pool(scenario, workers=1, max_queue_wait=900, clock=Clock())


ELASTIC = EngineConfig("piper", threads=1, max_threads=2)
JOE_LONG = SynthesisRequest(LONG.text, "en_US-joe-medium")


def thread_affinities(pid: int) -> list[set[int]]:
    return [os.sched_getaffinity(int(tid)) for tid in os.listdir(f"/proc/{pid}/task")]


def thread_ticks(pid: int) -> dict[int, int]:
    """CPU ticks (user + system) each thread of `pid` has used."""
    ticks = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        ticks[int(tid)] = int(fields[11]) + int(fields[12])
    return ticks


async def share_of_second_thread(pid: int, chunks: AsyncIterator[object], count: int) -> float:
    """Take `count` chunks; the part of the worker's CPU time its second-busiest thread used."""
    before = thread_ticks(pid)
    for _ in range(count):
        await anext(chunks)
    after = thread_ticks(pid)
    used = sorted((after[tid] - before.get(tid, 0) for tid in after), reverse=True)
    return used[1] / max(1, sum(used))


async def skip_buffered(chunks: AsyncIterator[object]) -> None:
    """Take the chunks made before a width change: those queued for the reader and in the
    socket, and the sentence the worker was making when told."""
    for _ in range(10):
        await anext(chunks)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_lone_job_gets_every_core_and_is_narrowed_while_another_runs() -> None:
    cores = sorted(os.sched_getaffinity(0))[:2]

    async def scenario(pool: WorkerPool) -> None:
        first_pid, second_pid = pool.worker_pids()
        first = pool.synthesize(JOE_LONG, PCM)
        await anext(first)
        # Alone: its threads may run anywhere in the pool, and two of them compute.
        assert all(cpus == set(cores) for cpus in thread_affinities(first_pid))
        assert await share_of_second_thread(first_pid, first, 6) > 0.15

        second = pool.synthesize(JOE_LONG, PCM)
        await anext(second)
        # Two jobs: each on its own core, computing on one thread (the first from its next
        # sentence on).
        assert all(cpus == {cores[0]} for cpus in thread_affinities(first_pid))
        assert all(cpus == {cores[1]} for cpus in thread_affinities(second_pid))
        await skip_buffered(first)
        assert await share_of_second_thread(first_pid, first, 4) < 0.05
        assert await share_of_second_thread(second_pid, second, 4) < 0.05

        # The second leaves: the first has the machine again.
        await second.aclose()
        await until(lambda: pool.stats().in_flight == 1)
        assert all(cpus == set(cores) for cpus in thread_affinities(first_pid))
        await skip_buffered(first)
        assert await share_of_second_thread(first_pid, first, 6) > 0.15
        await first.aclose()

    run_with_pool(scenario, config=ELASTIC)


def test_without_elastic_threads_a_lone_job_keeps_to_its_own_core() -> None:
    cores = sorted(os.sched_getaffinity(0))

    async def scenario(pool: WorkerPool) -> None:
        first_pid = pool.worker_pids()[0]
        job = pool.synthesize(JOE_LONG, PCM)
        await anext(job)
        assert all(cpus == {cores[0]} for cpus in thread_affinities(first_pid))
        assert await share_of_second_thread(first_pid, job, 4) < 0.05
        await job.aclose()

    run_with_pool(scenario, config=EngineConfig("piper", threads=1))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_job_in_another_pool_on_the_same_cores_narrows_a_lone_job() -> None:
    cores = sorted(os.sched_getaffinity(0))[:2]

    async def main() -> None:
        shared = SharedCores()
        piper, espeak = (
            WorkerPool(
                config,
                2,
                queue_size=8,
                max_queue_wait=30,
                job_timeout=60,
                cores=cores,
                shared_cores=shared,
            )
            for config in (ELASTIC, EngineConfig("espeak", threads=1, max_threads=2))
        )
        await asyncio.gather(piper.start(), espeak.start())
        try:
            pid = piper.worker_pids()[0]
            job = piper.synthesize(JOE_LONG, PCM)
            await anext(job)
            assert all(cpus == set(cores) for cpus in thread_affinities(pid))
            other = espeak.synthesize(LONG, PCM)
            await anext(other)
            assert all(cpus == {cores[0]} for cpus in thread_affinities(pid))
            await other.aclose()
            await until(lambda: espeak.stats().in_flight == 0)
            assert all(cpus == set(cores) for cpus in thread_affinities(pid))
            await job.aclose()
        finally:
            await asyncio.gather(piper.close(), espeak.close())

    asyncio.run(main())


def test_word_times_cross_from_the_worker_with_the_audio() -> None:
    text = "One sentence of speech. And 2 more!"

    async def scenario(pool: WorkerPool) -> list[str]:
        spec = OutputSpec(AudioFormat.PCM, 24000, word_times=True)
        words = [
            w
            async for chunk in pool.synthesize(SynthesisRequest(text, "en-us"), spec)
            for w in chunk.words
        ]
        return [text[w.start_char : w.end_char] for w in words]

    assert run_with_pool(scenario, workers=1) == [
        "One",
        "sentence",
        "of",
        "speech",
        "And",
        "2",
        "more",
    ]


def test_an_ended_job_is_freed_at_once_not_left_to_the_cyclic_garbage_collector() -> None:
    # A job left in a reference cycle waits, with its queue and events, for a full collection,
    # which a busy gateway runs rarely: its memory creeps up request after request.
    async def scenario(pool: WorkerPool) -> int:
        await collect(pool.synthesize(SHORT, PCM))
        gc.collect()
        gc.disable()
        try:
            for _ in range(5):
                await collect(pool.synthesize(SHORT, PCM))
            return sum(isinstance(thing, _Job) for thing in gc.get_objects())
        finally:
            gc.enable()

    assert run_with_pool(scenario, workers=1) == 0
