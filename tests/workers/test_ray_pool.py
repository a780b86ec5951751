"""RayPool's contract with the gateway, against a scripted Serve handle (no Ray running).

Each stream is a script of what Serve would deliver: the replica's `Started`, audio chunks,
Ray's exceptions, or a wait that never ends. The end-to-end behaviour on a real Ray instance
is in tests/e2e/test_ray_server.py; what both backends promise (a job completed, left, failed,
lost; a pool not started) is in test_pool_contract.py; here every other failure Ray can report
is checked to end the job as the local pool would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import ray
from ray.exceptions import ActorDiedError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

from speechgate.audio.formats import AudioFormat
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.errors import EngineFailed, NotReady, QueueFull, QueueStalled, WorkerLost
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.workers.ray_pool import RayCluster, RayPool
from speechgate.workers.ray_replica import Started
from tests.helpers.clock import Clock, run_on, settle
from tests.helpers.ray import NEVER, FakeHandle, FakeResponse, Gate, make_pool

REQUEST = SynthesisRequest("Hello.", "en-us")
PCM = OutputSpec(AudioFormat.PCM, 24000)
STARTED = Started(4242, "SERVE_REPLICA::speechgate-espeak#espeak#abc")
CHUNK = EncodedChunk(b"\x00\x01" * 100, 0.5)


def run(
    script: list[object], consume: Callable[[RayPool], Any], **overrides: Any
) -> tuple[RayPool, FakeResponse]:
    pool, response = make_pool(script, **overrides)
    asyncio.run(consume(pool))
    return pool, response


async def drain(pool: RayPool) -> list[EncodedChunk]:
    return [chunk async for chunk in pool.synthesize(REQUEST, PCM)]


def test_a_consumer_that_leaves_cancels_the_ray_request() -> None:
    async def leave_after_one(pool: RayPool) -> None:
        chunks = pool.synthesize(REQUEST, PCM)
        assert await anext(chunks) == CHUNK
        assert pool.running_pids() == [STARTED.pid]
        await chunks.aclose()

    pool, response = run([STARTED, CHUNK, CHUNK, CHUNK], leave_after_one)
    assert response.cancelled
    stats = pool.stats()
    assert (stats.jobs["cancelled"], stats.in_flight) == (1, 0)
    assert pool.running_pids() == []


def test_a_replica_that_dies_before_the_first_audio_is_worker_lost() -> None:
    pool, _ = make_pool([STARTED, ActorDiedError()])
    with pytest.raises(WorkerLost):
        asyncio.run(drain(pool))
    stats = pool.stats()
    assert (stats.jobs["lost"], stats.restarts, stats.in_flight) == (1, 1, 0)


def test_rays_back_pressure_is_queue_full_with_a_retry_estimate() -> None:
    pool, _ = make_pool([BackPressureError(num_queued_requests=2, max_queued_requests=2)])
    with pytest.raises(QueueFull) as refused:
        asyncio.run(drain(pool))
    # Three mean service times (the default before any job): two queued, then this one.
    assert refused.value.retry_after == pytest.approx(3.0)
    assert refused.value.headers["Retry-After"] == "3"
    stats = pool.stats()
    assert stats.rejected["queue_full"] == 1
    assert sum(stats.jobs.values()) == 0


def test_a_request_predicted_to_wait_too_long_is_refused_before_it_is_sent() -> None:
    clock = Clock()
    gate = Gate()
    handle = FakeHandle([STARTED, gate, CHUNK], [STARTED, CHUNK])
    pool = RayPool(
        EngineConfig("espeak"),
        RayCluster(owned=False),
        handle=handle,
        replicas=1,
        max_replicas=None,
        queue_size=2,
        max_queue_wait=5.0,
        job_timeout=30.0,
        clock=clock,
    )
    pool.service_times.record(1.0, 1.0, 10)  # measured: 10 characters a second
    long = SynthesisRequest("x" * 100, "en-us")  # 10 s

    async def scenario() -> QueueFull:
        running = asyncio.create_task(anext(pool.synthesize(long, PCM)))
        await settle()
        assert pool.running_pids() == [STARTED.pid]
        clock.advance(3.0)
        with pytest.raises(QueueFull) as refused:
            await drain(pool)
        gate.open.set()
        await running
        return refused.value

    refused = run_on(clock, scenario)
    assert refused.retry_after == pytest.approx(7.0)  # the 10 s job has 7 s left
    assert handle.calls == 1  # never sent to Serve
    assert pool.stats().rejected["predicted_wait"] == 1


def test_an_admitted_request_waits_in_serves_queue_past_max_queue_wait() -> None:
    clock = Clock()
    gate = Gate()
    pool, response = make_pool(
        [gate, STARTED, CHUNK], max_queue_wait=1.0, job_timeout=30.0, clock=clock
    )

    async def scenario() -> list[EncodedChunk]:
        task = asyncio.create_task(drain(pool))
        await settle()
        clock.advance(35.0)  # far past max_queue_wait, short of the safety wait (30 + 10)
        await settle()
        assert pool.stats().queued == 1
        gate.open.set()
        return await task

    assert run_on(clock, scenario) == [CHUNK]
    assert not response.cancelled


def test_a_request_no_replica_takes_up_for_the_safety_wait_is_a_queue_stalled() -> None:
    clock = Clock()
    pool, response = make_pool([NEVER], max_queue_wait=1.0, job_timeout=30.0, clock=clock)

    async def scenario() -> None:
        task = asyncio.create_task(drain(pool))
        await settle()
        clock.advance(41.0)
        await settle()
        with pytest.raises(QueueStalled):
            await task

    run_on(clock, scenario)
    assert response.cancelled
    stats = pool.stats()
    assert (stats.rejected["queue_stalled"], stats.queued, sum(stats.jobs.values())) == (1, 0, 0)


def test_a_job_past_its_timeout_kills_its_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    killed: list[str] = []
    monkeypatch.setattr(ray, "get_actor", lambda name, namespace: (name, namespace))
    monkeypatch.setattr(ray, "kill", lambda actor: killed.append(actor[0]))
    pool, response = make_pool([STARTED, CHUNK, NEVER], job_timeout=0.01)
    with pytest.raises(EngineFailed) as failed:
        asyncio.run(drain(pool))
    assert failed.value.code == "job_timeout"
    assert killed == [STARTED.actor_name]
    assert response.cancelled
    stats = pool.stats()
    assert (stats.jobs["lost"], stats.restarts) == (1, 1)


def test_a_deployment_that_failed_is_not_ready() -> None:
    pool, _ = make_pool([DeploymentUnavailableError("espeak")])
    with pytest.raises(NotReady):
        asyncio.run(drain(pool))
