"""The worker pool with real engine processes."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest

from speechgate.audio.formats import AudioFormat
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.errors import EngineFailed, QueueFull, SlowReader, WorkerLost, WorkerStalled
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.workers.admission import PRIOR_CHARACTERS_PER_SECOND, ServiceTimes
from speechgate.workers.cores import SharedCores
from speechgate.workers.pool import StartupError, WorkerPool, WorkerState, _Job, assign_cpus
from tests.helpers.clock import Clock
from tests.helpers.waiting import until

pytestmark = pytest.mark.slow

T = TypeVar("T")
PCM = OutputSpec(AudioFormat.PCM, 24000)
SHORT = SynthesisRequest("One sentence of speech.", "en-us")
MEDIUM = SynthesisRequest(" ".join(f"This is sentence number {n}." for n in range(30)), "en-us")
# Many times the chunks a job's inbox holds before its worker pauses it, and several minutes of
# speech; espeak-ng speaks it in a fraction of a second when nothing holds it back.
LONG = SynthesisRequest(" ".join(f"This is sentence number {n}." for n in range(100)), "en-us")

# Where the pool is the subject, the fake engine (in real worker processes): it speaks faster
# than espeak-ng, and with `chunk_delay` (SLOW) spends a set time on each sentence, so a long
# text keeps a worker busy for as long as a test needs while another job is served.
SLOW = EngineConfig("fake", options={"chunk_delay": "0.02"})
FAKE_SHORT = SynthesisRequest("One sentence of speech. And a second one.", "en-high")
# 15 sentences: 0.3 s of a worker's time when SLOW.
FAKE_MEDIUM = SynthesisRequest(
    " ".join(f"This is sentence number {n}." for n in range(15)), "en-high"
)
FAKE_LONG = SynthesisRequest(LONG.text, "en-low")  # 100 sentences: 2 s of the worker's time


def run_with_pool(
    scenario: Callable[[WorkerPool], Awaitable[T]],
    *,
    config: EngineConfig | None = None,
    workers: int = 2,
    job_timeout: float = 60.0,
    slow_reader_timeout: float = 60.0,
    max_queue_wait: float = 30.0,
    jobs_per_worker: int = 1,
    clock: Callable[[], float] = time.monotonic,
    time_engine: bool = True,
    stall_timeout: float = 15.0,
    max_retry_after: float = 30.0,
) -> T:
    pool = WorkerPool(
        config or EngineConfig("espeak"),
        workers,
        queue_size=8,
        max_queue_wait=max_queue_wait,
        job_timeout=job_timeout,
        slow_reader_timeout=slow_reader_timeout,
        jobs_per_worker=jobs_per_worker,
        clock=clock,
        stall_timeout=stall_timeout,
        max_retry_after=max_retry_after,
    )
    return asyncio.run(with_pool(pool, scenario, time_engine=jobs_per_worker > 1 and time_engine))


async def with_pool(
    pool: WorkerPool, scenario: Callable[[WorkerPool], Awaitable[T]], time_engine: bool
) -> T:
    """Start `pool`, run `scenario` on it (the engine timed first if `time_engine`), close it."""
    await pool.start()
    try:
        if time_engine:
            await time_the_engine(pool)
        return await scenario(pool)
    finally:
        await pool.close()


async def time_the_engine(pool: WorkerPool) -> None:
    """Measure the engine at ten times real time, as if a job had run: a worker shares itself
    among jobs only once the engine has been timed fast enough."""
    pool.service_times.record(1.0, 10.0, 150)


async def collect(chunks: AsyncIterator[object]) -> int:
    return sum([1 async for _ in chunks])


def test_cpus_are_spread_one_block_per_worker() -> None:
    assert assign_cpus(2, 1, [0, 1]) == [(0,), (1,)]
    assert assign_cpus(1, 2, [0, 1]) == [(0, 1)]
    assert assign_cpus(3, 1, [4, 5]) == [(4,), (5,), (4,)]


def test_workers_pinned_to_their_own_cores_serve_concurrent_jobs_up_to_their_count() -> None:
    # One pool of two workers for both: where each worker runs, and that both serve at once.
    async def scenario(pool: WorkerPool) -> tuple[list[set[int]], list[int]]:
        affinities = [os.sched_getaffinity(pid) for pid in pool.worker_pids()]
        counts = await asyncio.gather(*(collect(pool.synthesize(SHORT, PCM)) for _ in range(2)))
        stats = pool.stats()
        assert stats.jobs["completed"] == 2
        assert stats.in_flight == 0
        return affinities, counts

    affinities, counts = run_with_pool(scenario)
    cores = sorted(os.sched_getaffinity(0))
    assert affinities == [{cores[0]}, {cores[1 % len(cores)]}]
    assert all(count >= 2 for count in counts)


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

    # espeak speaks LONG in well under a second; a millisecond is far too short.
    run_with_pool(scenario, workers=1, job_timeout=0.001)


def test_an_engine_that_cannot_load_fails_the_start() -> None:
    async def scenario(pool: WorkerPool) -> None:
        raise AssertionError("unreachable")

    with pytest.raises(StartupError, match="nonexistent"):
        run_with_pool(
            scenario,
            config=EngineConfig("piper", options={"model": "/nonexistent.onnx"}),
            workers=1,
        )


def test_a_slow_consumer_pauses_the_worker_instead_of_buffering_everything() -> None:
    async def scenario(pool: WorkerPool) -> None:
        chunks = pool.synthesize(FAKE_LONG, PCM)
        first = await anext(chunks)
        # The fake engine speaks all of FAKE_LONG in a fraction of a second when nothing holds
        # it back; with nobody reading, the worker must stay paused with only a few chunks
        # buffered.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await until(lambda: pool.stats().jobs["completed"] == 1)
        assert pool.stats().in_flight == 1
        rest = [chunk async for chunk in chunks]
        assert pool.stats().jobs["completed"] == 1
        assert sum(c.audio_seconds for c in [first, *rest]) > 60  # all of it, in the end

    # The pool is the subject: the fake engine, faster than espeak-ng, in a real worker process.
    run_with_pool(scenario, config=EngineConfig("fake"), workers=1)


def test_time_paused_for_a_slow_reader_does_not_count_against_the_job_timeout() -> None:
    async def scenario(pool: WorkerPool) -> None:
        chunks = pool.synthesize(FAKE_MEDIUM, PCM)
        first = await anext(chunks)
        # Nobody reads for longer than the whole job may take: the worker waits, paused
        # (more chunks than the inbox holds are ready), and that wait is not synthesis.
        await asyncio.sleep(0.75)
        rest = [chunk async for chunk in chunks]
        assert sum(c.audio_seconds for c in [first, *rest]) > 10
        assert pool.stats().restarts == 0

    # The fake engine speaks FAKE_MEDIUM in a few hundredths of a second when nobody holds it
    # back (a loaded machine too); the pool's accounting is the subject, not the engine.
    run_with_pool(scenario, config=EngineConfig("fake"), workers=1, job_timeout=0.5)


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


def test_the_workers_warm_up_measures_the_service_rate_then_completed_jobs_do() -> None:
    async def scenario(pool: WorkerPool) -> tuple[float, float]:
        warmed = pool.service_times.rate
        await collect(pool.synthesize(MEDIUM, PCM))
        return warmed, pool.service_times.rate

    # espeak speaks hundreds of times faster than real time, far above the real-time prior.
    warmed, measured = run_with_pool(scenario, workers=1)
    assert warmed > 10 * PRIOR_CHARACTERS_PER_SECOND
    assert measured > 10 * PRIOR_CHARACTERS_PER_SECOND


def test_a_fresh_pool_admits_concurrent_requests_at_its_engines_speed() -> None:
    async def scenario(pool: WorkerPool) -> list[int]:
        # 15 sentences each: 28 s at the real-time prior, a fraction of a second here.
        return await asyncio.gather(*(collect(pool.synthesize(FAKE_MEDIUM, PCM)) for _ in range(4)))

    counts = run_with_pool(
        scenario,
        config=EngineConfig("fake"),
        workers=1,
        jobs_per_worker=4,
        max_queue_wait=5.0,
        time_engine=False,
    )
    assert all(count > 15 for count in counts)


def test_a_wedged_worker_is_replaced_and_its_clients_told_at_once() -> None:
    async def scenario(pool: WorkerPool) -> None:
        (pid,) = pool.worker_pids()
        chunks = pool.synthesize(FAKE_LONG, PCM)
        await anext(chunks)
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(WorkerStalled) as stalled:
                await collect(chunks)
            waited = time.monotonic() - started
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        assert stalled.value.status_code == 503
        assert stalled.value.code == "worker_stalled"
        assert "Retry-After" in stalled.value.headers
        assert waited < 30.0  # far below the job timeout
        await until(lambda: pool.stats().workers[WorkerState.IDLE] == 1)
        assert pool.worker_pids() != [pid]
        assert pool.stats().restarts == 1
        assert await collect(pool.synthesize(FAKE_SHORT, PCM)) >= 2

    run_with_pool(scenario, config=SLOW, workers=1, job_timeout=60.0, stall_timeout=1.0)


def test_a_segment_longer_than_the_stall_timeout_is_not_taken_for_a_wedged_worker() -> None:
    async def scenario(pool: WorkerPool) -> int:
        return await collect(pool.synthesize(FAKE_SHORT, PCM))

    # Each sentence takes the engine 1.5 s, all in one step; the heartbeat goes on meanwhile.
    slow = EngineConfig("fake", options={"chunk_delay": "1.5"})
    assert run_with_pool(scenario, config=slow, workers=1, stall_timeout=1.0) >= 2


def test_a_request_behind_too_much_work_is_refused_at_once_and_the_admitted_are_served() -> None:
    # The clock stands still, so the predictions are exact: 10 characters a second, measured.
    async def scenario(pool: WorkerPool) -> None:
        pool.service_times.record(1.0, 1.0, 10)
        running = pool.synthesize(FAKE_LONG, PCM)  # held: nobody reads beyond its first chunk
        await anext(running)
        queued = asyncio.create_task(collect(pool.synthesize(FAKE_MEDIUM, PCM)))
        await until(lambda: pool.stats().queued == 1)  # predicted start: FAKE_LONG's 279 s
        with pytest.raises(QueueFull) as refused:
            await anext(pool.synthesize(FAKE_SHORT, PCM))
        assert refused.value.retry_after == pytest.approx(
            (len(FAKE_LONG.text) + len(FAKE_MEDIUM.text)) / 10
        )
        assert pool.stats().queued == 1
        await collect(running)
        assert await queued >= 2
        stats = pool.stats()
        assert stats.rejected == {
            "queue_full": 0,
            "predicted_wait": 1,
            "held_for_retry": 0,
            "queue_stalled": 0,
            "pushed_out": 0,
        }
        assert stats.jobs["completed"] == 2

    assert len(FAKE_LONG.text) / 10 < 300 < (len(FAKE_LONG.text) + len(FAKE_MEDIUM.text)) / 10
    run_with_pool(
        scenario,
        config=EngineConfig("fake"),
        workers=1,
        max_queue_wait=300,
        clock=Clock(),
        max_retry_after=600,
    )


ELASTIC = EngineConfig("piper", threads=1, max_threads=2)
# Where only the cores a worker's threads may run on are measured (the pool moves every thread
# of a worker, whatever its engine), not how many of them compute: espeak-ng, which loads at
# once, where Piper loads a model.
ELASTIC_ESPEAK = EngineConfig("espeak", threads=1, max_threads=2)
# More sentences than the thread measurements below take (they close the job when done).
JOE_LONG = SynthesisRequest(
    " ".join(f"This is sentence number {n}." for n in range(300)), "en_US-joe-medium"
)


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
    # A worker may have one thread only (onnxruntime at one thread computes on the caller's):
    # then no second thread computed at all.
    second = used[1] if len(used) > 1 else 0
    return second / max(1, sum(used))


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


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_second_job_on_the_same_worker_narrows_the_first_and_its_end_widens_it_again() -> None:
    cores = sorted(os.sched_getaffinity(0))[:2]

    async def scenario(pool: WorkerPool) -> None:
        (pid,) = pool.worker_pids()
        first = pool.synthesize(LONG, PCM)
        await anext(first)
        assert all(cpus == set(cores) for cpus in thread_affinities(pid))
        second = pool.synthesize(LONG, PCM)
        await anext(second)
        # Not alone any more, though no other worker runs anything.
        assert all(cpus == {cores[0]} for cpus in thread_affinities(pid))
        await second.aclose()
        await until(lambda: pool.stats().in_flight == 1)
        assert all(cpus == set(cores) for cpus in thread_affinities(pid))
        await first.aclose()

    run_with_pool(scenario, config=ELASTIC_ESPEAK, workers=1, jobs_per_worker=2)


def test_without_elastic_threads_a_lone_job_keeps_to_its_own_core() -> None:
    cores = sorted(os.sched_getaffinity(0))

    async def scenario(pool: WorkerPool) -> None:
        first_pid = pool.worker_pids()[0]
        job = pool.synthesize(JOE_LONG, PCM)
        await anext(job)
        assert all(cpus == {cores[0]} for cpus in thread_affinities(first_pid))
        assert await share_of_second_thread(first_pid, job, 4) < 0.05
        await job.aclose()

    run_with_pool(scenario, config=EngineConfig("piper", threads=1), workers=1)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_job_in_another_pool_on_the_same_cores_narrows_a_lone_job() -> None:
    cores = sorted(os.sched_getaffinity(0))[:2]

    async def main() -> None:
        shared = SharedCores()
        lone, other = (
            WorkerPool(
                config,
                1,  # one worker each: the first core is both pools' first worker's
                queue_size=8,
                max_queue_wait=30,
                job_timeout=60,
                cores=cores,
                shared_cores=shared,
            )
            for config in (ELASTIC_ESPEAK, ELASTIC_ESPEAK)
        )
        await asyncio.gather(lone.start(), other.start())
        try:
            pid = lone.worker_pids()[0]
            job = lone.synthesize(LONG, PCM)
            await anext(job)
            assert all(cpus == set(cores) for cpus in thread_affinities(pid))
            intruder = other.synthesize(LONG, PCM)
            await anext(intruder)
            assert all(cpus == {cores[0]} for cpus in thread_affinities(pid))
            await intruder.aclose()
            await until(lambda: other.stats().in_flight == 0)
            assert all(cpus == set(cores) for cpus in thread_affinities(pid))
            await job.aclose()
        finally:
            await asyncio.gather(lone.close(), other.close())

    asyncio.run(main())


async def read_all(name: str, chunks: AsyncIterator[EncodedChunk], events: list[str]) -> bytes:
    """Every chunk's bytes; `events` gets `name` once for each chunk, as it arrives."""
    data = b""
    async for chunk in chunks:
        events.append(name)
        data += chunk.data
    return data


def last(events: list[str], name: str) -> int:
    return len(events) - 1 - events[::-1].index(name)


def test_a_short_job_gets_its_first_audio_before_a_long_one_on_its_worker_ends() -> None:
    # 40 sentences, 0.8 s of the worker's time: the short one's two are done within a few.
    long_text = SynthesisRequest(
        " ".join(f"This is sentence number {n}." for n in range(40)), "en-low"
    )

    async def scenario(pool: WorkerPool) -> list[str]:
        events: list[str] = []
        long = pool.synthesize(long_text, PCM)
        await anext(long)
        both = asyncio.gather(
            read_all("long", long, events),
            read_all("short", pool.synthesize(FAKE_SHORT, PCM), events),
        )
        await both
        return events

    events = run_with_pool(scenario, config=SLOW, workers=1, jobs_per_worker=2)
    # The long job's sentences go on after the short one's audio has all come.
    assert last(events, "short") < len(events) - 20
    assert events[-1] == "long"


def test_interleaved_jobs_sound_as_each_alone() -> None:
    # The fake engine, because it repeats itself bit for bit (espeak-ng and Piper do not).
    # Eight sentences each: each has several turns on the worker while the other is on it.
    first = SynthesisRequest(" ".join(f"The first text, part {n}." for n in range(8)), "en-high")
    second = SynthesisRequest(" ".join(f"And a second one, {n}!" for n in range(8)), "en-low")
    spec = OutputSpec(AudioFormat.MP3, 24000)

    async def scenario(pool: WorkerPool) -> tuple[list[bytes], list[bytes], list[str]]:
        alone = [
            b"".join([c.data async for c in pool.synthesize(r, spec)]) for r in (first, second)
        ]
        events: list[str] = []
        together = await asyncio.gather(
            read_all("first", pool.synthesize(first, spec), events),
            read_all("second", pool.synthesize(second, spec), events),
        )
        return alone, list(together), events

    alone, together, events = run_with_pool(scenario, config=SLOW, workers=1, jobs_per_worker=2)
    # They did run interleaved: each had audio out before the other ended.
    assert events.index("second") < last(events, "first")
    assert events.index("first") < last(events, "second")
    assert together == alone


def test_a_paused_job_does_not_hold_up_the_others_on_its_worker() -> None:
    async def scenario(pool: WorkerPool) -> None:
        held = pool.synthesize(FAKE_LONG, PCM)  # nobody reads beyond its first chunk
        first = await anext(held)
        # Served by the same (only) worker, to the end, while the held job stays paused.
        async with asyncio.timeout(30):
            assert await collect(pool.synthesize(FAKE_MEDIUM, PCM)) >= 2
        stats = pool.stats()
        assert (stats.jobs["completed"], stats.in_flight) == (1, 1)
        rest = [chunk async for chunk in held]
        assert sum(c.audio_seconds for c in [first, *rest]) > 60  # all of it, in the end
        assert pool.stats().jobs["completed"] == 2

    run_with_pool(scenario, config=EngineConfig("fake"), workers=1, jobs_per_worker=2)


def test_a_reader_too_slow_loses_its_job_alone() -> None:
    async def scenario(pool: WorkerPool) -> None:
        held = pool.synthesize(LONG, PCM)  # nobody reads beyond its first chunk
        await anext(held)
        served = asyncio.create_task(collect(pool.synthesize(MEDIUM, PCM)))
        await until(lambda: pool.stats().jobs["cancelled"] == 1)
        assert await served >= 2
        with pytest.raises(SlowReader):
            async for _ in held:
                pass
        jobs = pool.stats().jobs
        assert (jobs["completed"], pool.stats().restarts) == (1, 0)

    run_with_pool(scenario, workers=1, jobs_per_worker=2, slow_reader_timeout=0.5)


def test_a_cancelled_job_leaves_the_others_on_its_worker_running() -> None:
    async def scenario(pool: WorkerPool) -> None:
        leaving = pool.synthesize(FAKE_LONG, PCM)
        await anext(leaving)
        staying = asyncio.create_task(collect(pool.synthesize(FAKE_SHORT, PCM)))
        await until(lambda: pool.stats().in_flight == 2)
        await leaving.aclose()
        assert await staying >= 2
        await until(lambda: pool.stats().in_flight == 0)
        jobs = pool.stats().jobs
        assert (jobs["cancelled"], jobs["completed"], pool.stats().restarts) == (1, 1, 0)

    run_with_pool(scenario, config=SLOW, workers=1, jobs_per_worker=2)


def test_a_worker_that_dies_loses_its_jobs_only() -> None:
    async def scenario(pool: WorkerPool) -> None:
        doomed_pid = pool.worker_pids()[0]
        # Slots go to every worker before any worker gets a second: 0, 1, then 0 again.
        streams = [pool.synthesize(FAKE_LONG, PCM) for _ in range(3)]
        for stream in streams:
            await anext(stream)
        os.kill(doomed_pid, signal.SIGKILL)
        for stream in (streams[0], streams[2]):
            with pytest.raises(WorkerLost):
                await collect(stream)
        assert await collect(streams[1]) > 100
        await until(lambda: pool.stats().workers[WorkerState.IDLE] == 2)
        stats = pool.stats()
        assert (stats.restarts, stats.jobs["lost"], stats.jobs["completed"]) == (1, 2, 1)
        assert await collect(pool.synthesize(FAKE_SHORT, PCM)) >= 2

    # Not slowed: the jobs nobody reads are held (paused on their full inboxes) until the kill
    # however fast the engine, and the one read to the end need not take seconds.
    run_with_pool(scenario, config=EngineConfig("fake"), jobs_per_worker=2)


def test_a_worker_takes_up_to_its_slots_and_the_rest_wait_their_turn() -> None:
    async def scenario(pool: WorkerPool) -> None:
        running = [pool.synthesize(FAKE_LONG, PCM) for _ in range(2)]
        for stream in running:
            await anext(stream)
        queued = asyncio.create_task(collect(pool.synthesize(FAKE_SHORT, PCM)))
        await until(lambda: pool.stats().queued == 1)
        assert pool.stats().in_flight == 2
        await running[0].aclose()
        assert await queued >= 2
        await running[1].aclose()

    # Admitted, whatever the wait the real-time prior predicts behind two long texts.
    run_with_pool(scenario, config=SLOW, workers=1, jobs_per_worker=2, max_queue_wait=1e6)


def test_jobs_sharing_a_worker_record_their_share_of_its_time_not_their_wall_time() -> None:
    async def rate_after(pool: WorkerPool, jobs: int) -> float:
        times = pool.service_times = ServiceTimes()
        await asyncio.gather(*(collect(pool.synthesize(FAKE_MEDIUM, PCM)) for _ in range(jobs)))
        return times.rate

    async def scenario(pool: WorkerPool) -> tuple[float, float]:
        return await rate_after(pool, 1), await rate_after(pool, 2)

    alone, shared = run_with_pool(scenario, config=SLOW, workers=1, jobs_per_worker=2)
    # Each of two jobs on one worker takes twice as long from end to end; its work is the same.
    assert shared > 0.75 * alone


def test_the_job_timeout_counts_a_jobs_share_of_its_worker_not_the_time_it_shares_it() -> None:
    sentences = 6
    text = SynthesisRequest(
        " ".join(f"This is sentence number {n}." for n in range(sentences)), "en-high"
    )
    # Few sentences, each mostly a wait: what a loaded machine adds to each (encoding, the
    # pipe) is not counted many times over into a job's share.
    slower = EngineConfig("fake", options={"chunk_delay": "0.1"})

    async def scenario(pool: WorkerPool) -> None:
        # 0.6 s of work each (6 sentences at 0.1 s), 1.2 s together on one worker.
        counts = await asyncio.gather(*(collect(pool.synthesize(text, PCM)) for _ in range(2)))
        assert all(count > sentences for count in counts)
        assert (pool.stats().jobs["completed"], pool.stats().restarts) == (2, 0)

    run_with_pool(scenario, config=slower, workers=1, jobs_per_worker=2, job_timeout=0.9)


def test_a_worker_is_shared_only_by_jobs_each_still_faster_than_real_time() -> None:
    # The fake engine's "Hi." is 0.18 s of audio: 0.1 s of work is 1.8x real time, under the
    # 2x that two jobs on one worker would each need; 0.01 s is 18x, room for four.
    hello = SynthesisRequest("Hi. Hi. Hi.", "en-high")

    async def three_at_once(pool: WorkerPool) -> tuple[int, int]:
        jobs = [asyncio.create_task(collect(pool.synthesize(hello, PCM))) for _ in range(3)]
        await until(lambda: pool.stats().in_flight + pool.stats().queued == 3)
        shape = pool.stats().in_flight, pool.stats().queued
        await asyncio.gather(*jobs)
        return shape

    async def untimed_then_timed(pool: WorkerPool) -> list[tuple[int, int]]:
        # The first three, once done, have measured the engine's speed for the next three.
        return [await three_at_once(pool), await three_at_once(pool)]

    async def three_after_one(pool: WorkerPool) -> tuple[int, int]:
        await collect(pool.synthesize(hello, PCM))  # its own speed, measured
        return await three_at_once(pool)

    async def on_engine(scenario: Callable[[WorkerPool], Awaitable[T]], delay: str) -> T:
        config = EngineConfig("fake", options={"chunk_delay": delay})
        pool = WorkerPool(
            config, 1, queue_size=8, max_queue_wait=30, job_timeout=60, jobs_per_worker=4
        )
        return await with_pool(pool, scenario, time_engine=False)

    async def both() -> tuple[list[tuple[int, int]], tuple[int, int]]:
        # Side by side, two pools of their own: the jobs mostly wait out `chunk_delay`.
        return await asyncio.gather(
            on_engine(untimed_then_timed, "0.01"), on_engine(three_after_one, "0.1")
        )

    fast, slow = asyncio.run(both())
    # Timed by its warm-up at start-up, this one is fast enough for all three at once.
    assert fast == [(3, 0), (3, 0)]
    # Too slow to share: one job at a time, the others queued.
    assert slow == (1, 2)


def test_word_times_cross_from_the_worker_and_an_ended_job_is_freed_at_once() -> None:
    # One worker for both (each needs only jobs that end). A job left in a reference cycle
    # waits, with its queue and events, for a full collection, which a busy gateway runs
    # rarely: its memory creeps up request after request.
    text = "One sentence of speech. And 2 more!"

    async def scenario(pool: WorkerPool) -> tuple[list[str], int]:
        spec = OutputSpec(AudioFormat.PCM, 24000, word_times=True)
        words = [
            w
            async for chunk in pool.synthesize(SynthesisRequest(text, "en-us"), spec)
            for w in chunk.words
        ]
        return [text[w.start_char : w.end_char] for w in words], await unfreed_jobs(pool)

    spoken, unfreed = run_with_pool(scenario, workers=1)
    assert spoken == ["One", "sentence", "of", "speech", "And", "2", "more"]
    assert unfreed == 0


async def unfreed_jobs(pool: WorkerPool) -> int:
    """Jobs still alive after five more have ended, with the cyclic collector off."""
    await collect(pool.synthesize(SHORT, PCM))
    gc.collect()
    gc.disable()
    try:
        for _ in range(5):
            await collect(pool.synthesize(SHORT, PCM))
        # `type() is`, not isinstance: that reads `__class__`, which on some of torch's
        # objects (in a test process that imported it) is a deprecated, warning property.
        return sum(type(thing) is _Job for thing in gc.get_objects())
    finally:
        gc.enable()
