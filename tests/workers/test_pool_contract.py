"""What every pool backend promises the gateway (`workers.interface.Pool`), run over each.

The local backend runs the fake engine in real worker processes (told to fail, or slowed down,
through its options, and killed for real); Ray runs against a scripted Serve handle
(tests/helpers/ray.py) that delivers what a replica would. What only one backend does (worker
restarts and pinning, Serve's back-pressure) stays in test_pool.py and test_ray_pool.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import pytest

from speechgate.audio.formats import AudioFormat
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.errors import EngineFailed, NotReady, WorkerLost
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.workers.interface import Pool
from speechgate.workers.pool import WorkerPool
from tests.helpers.waiting import until

PCM = OutputSpec(AudioFormat.PCM, 24000)
# What each scenario asks the engine for (the local backend; Ray's script stands in for it).
SPEAKS = SynthesisRequest("One sentence of speech. And a second one.", "en-high")
FAILS = SynthesisRequest("This one is fine. This one goes boom.", "en-high")
LONG = SynthesisRequest(" ".join(f"This is sentence number {n}." for n in range(200)), "en-high")


class Backend(Protocol):
    def pool(self, scenario: str) -> AbstractAsyncContextManager[Pool]:
        """A started pool whose engine does what `scenario` says: "speaks" (a short job),
        "fails" (an engine error after the first chunk), "long" (a job that runs for seconds),
        "dies" (a job whose worker or replica dies after the first chunk)."""
        ...

    def unstarted(self) -> Pool: ...

    async def after_first_chunk(self, pool: Pool, scenario: str) -> None: ...


class Local:
    @asynccontextmanager
    async def pool(self, scenario: str) -> AsyncIterator[Pool]:
        options = {"fails": {"fail_on": "boom"}, "long": {"chunk_delay": "0.02"}}
        options["dies"] = options["long"]
        pool = self._pool(EngineConfig("fake", options=options.get(scenario, {})))
        await pool.start()
        try:
            yield pool
        finally:
            await pool.close()

    def unstarted(self) -> Pool:
        return self._pool(EngineConfig("fake"))

    @staticmethod
    def _pool(config: EngineConfig) -> WorkerPool:
        return WorkerPool(config, 1, queue_size=4, max_queue_wait=30.0, job_timeout=60.0)

    async def after_first_chunk(self, pool: Pool, scenario: str) -> None:
        if scenario == "dies":
            assert isinstance(pool, WorkerPool)
            (pid,) = pool.worker_pids()
            os.kill(pid, signal.SIGKILL)


class Ray:
    def __init__(self) -> None:
        pytest.importorskip("ray")

    @asynccontextmanager
    async def pool(self, scenario: str) -> AsyncIterator[Pool]:
        from ray.exceptions import ActorDiedError, RayTaskError

        from speechgate.workers.ray_replica import Started
        from tests.helpers.ray import make_pool

        started = Started(4242, "SERVE_REPLICA::speechgate-fake#fake#abc")
        chunk = EncodedChunk(b"\x00\x01" * 100, 0.5)
        error = RayTaskError("synthesize", "Traceback ...", ValueError("boom"))  # type: ignore[no-untyped-call]
        scripts: dict[str, list[object]] = {
            "speaks": [started, chunk, chunk],
            "fails": [started, chunk, error],
            "long": [started, *[chunk] * 200],
            "dies": [started, chunk, ActorDiedError()],
        }
        # Every call after the first gets the short job: the one that follows a scenario.
        pool, _ = make_pool(scripts[scenario], scripts["speaks"])
        yield pool

    def unstarted(self) -> Pool:
        from speechgate.workers.ray_pool import RayCluster, RayPool

        return RayPool(
            EngineConfig("fake"),
            RayCluster(owned=False),
            replicas=1,
            max_replicas=None,
            queue_size=1,
            max_queue_wait=1,
            job_timeout=1,
        )

    async def after_first_chunk(self, pool: Pool, scenario: str) -> None:
        pass


@pytest.fixture(params=["local", "ray"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return Local() if request.param == "local" else Ray()


def run(backend: Backend, scenario: str, body: Callable[[Pool], Awaitable[None]]) -> None:
    async def main() -> None:
        async with backend.pool(scenario) as pool:
            await body(pool)

    asyncio.run(main())


async def drain(pool: Pool, request: SynthesisRequest) -> list[EncodedChunk]:
    return [chunk async for chunk in pool.synthesize(request, PCM)]


def test_a_completed_job_streams_its_chunks_and_is_timed(backend: Backend) -> None:
    async def body(pool: Pool) -> None:
        chunks = await drain(pool, SPEAKS)
        assert len(chunks) >= 2 and all(chunk.data for chunk in chunks)
        stats = pool.stats()
        assert stats.jobs["completed"] == 1
        assert (stats.queued, stats.in_flight) == (0, 0)
        assert pool.service_times.real_time_factor is not None

    run(backend, "speaks", body)


def test_a_consumer_that_leaves_cancels_the_job_and_the_next_one_runs(backend: Backend) -> None:
    async def body(pool: Pool) -> None:
        chunks = pool.synthesize(LONG, PCM)
        await anext(chunks)
        await chunks.aclose()
        await until(lambda: pool.stats().jobs["cancelled"] == 1)
        assert pool.stats().in_flight == 0
        assert len(await drain(pool, SPEAKS)) >= 2

    run(backend, "long", body)


def test_an_engine_error_mid_stream_is_engine_failed(backend: Backend) -> None:
    async def body(pool: Pool) -> None:
        received = []
        # The engine's own error, named by its type: "ValueError: boom", "RuntimeError: ...".
        with pytest.raises(EngineFailed, match=r"Error: .*boom"):
            async for chunk in pool.synthesize(FAILS, PCM):
                received.append(chunk)
        assert received  # the audio before the error was delivered
        assert (pool.stats().jobs["failed"], pool.stats().in_flight) == (1, 0)

    run(backend, "fails", body)


def test_a_worker_that_dies_mid_stream_ends_the_stream_with_worker_lost(
    backend: Backend,
) -> None:
    async def body(pool: Pool) -> None:
        chunks = pool.synthesize(LONG, PCM)
        assert await anext(chunks)
        await backend.after_first_chunk(pool, "dies")
        with pytest.raises(WorkerLost):
            async for _ in chunks:
                pass
        stats = pool.stats()
        assert (stats.jobs["lost"], stats.in_flight) == (1, 0)

    run(backend, "dies", body)


def test_a_pool_not_started_is_not_ready(backend: Backend) -> None:
    with pytest.raises(NotReady):
        asyncio.run(drain(backend.unstarted(), SPEAKS))
