"""The Ray Serve backend: a real server on a local Ray instance, its replicas, the SDK.

One Ray instance (2 CPUs, no dashboard) serves the whole module: it takes seconds to start.
The server runs one replica per engine with a queue of one, so that a burst overflows Ray's
queue and a killed replica is the only one. espeak-ng checks the audio; the fake engine, which
spends `SENTENCE_DELAY` on each sentence, gives jobs that are still running when a test acts
on them (a replica renders without waiting for its listener, so espeak-ng would have finished)
without a model to load in every replica Ray starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Iterator

import httpx
import openai
import pytest
import ray
from ray import serve

from speechgate.audio.formats import AudioFormat
from speechgate.workers.ray_pool import RayPool
from tests.helpers.audio import decode_audio
from tests.helpers.postgres import fresh_database
from tests.helpers.server import RunningServer, running_server, sdk_client
from tests.helpers.settings import make_settings
from tests.helpers.streaming import read_streamed
from tests.helpers.tenancy import ADMIN_KEY, attempt, new_key
from tests.helpers.waiting import until, wait_for

pytestmark = pytest.mark.slow

TEXT = "The quick brown fox jumps over the lazy dog. Then it runs far away into the quiet woods."
# Seconds the fake engine spends on each sentence: long enough for a burst to overflow the
# queue behind one job, yet only sleep, where a real engine's work would take a core.
SENTENCE_DELAY = 0.1
# The longest input allowed, in 56 sentences: seconds of work for the slow engine.
LONG = " ".join(
    f"Sentence number {n} goes on for a while, so that the replica stays busy." for n in range(56)
)[:4096]
# About half a minute of speech in a dozen sentences: a second or more for the slow engine.
MEDIUM = " ".join(f"Here is sentence number {n} of a medium passage." for n in range(12))


@pytest.fixture(scope="module")
def ray_server() -> Iterator[RunningServer]:
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        settings = make_settings(
            engines=["espeak", "fake"],
            default_engine="espeak",
            engine_options={"fake": {"chunk_delay": str(SENTENCE_DELAY)}},
            pool={"backend": "ray", "queue_size": 1, "max_queue_wait": 60},
            ray={"replicas": 1, "health_check_period": 0.5},
            # A killed replica is replaced once a health check finds it dead: Serve's 10 s
            # period would be most of each replica-killed test.
        )
        with running_server(settings) as server:
            yield server
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.fixture
def client(ray_server: RunningServer) -> Iterator[openai.OpenAI]:
    with sdk_client(ray_server) as sdk:
        yield sdk


def pool_of(server: RunningServer, engine: str = "espeak") -> RayPool:
    pool = server.runtime.pools[engine]
    assert isinstance(pool, RayPool)
    return pool


def speech(text: str, fmt: str = "pcm", model: str = "espeak") -> dict[str, object]:
    return {"model": model, "voice": "alloy", "input": text, "response_format": fmt}


def replica_jobs(pool: RayPool) -> dict[str, int]:
    """How the (only) replica's jobs ended, by its own count. Serve runs the call once the
    replica is free: at once after a cancelled job, only at its end after one left running."""
    jobs: dict[str, int] = serve.get_app_handle(pool.app).jobs.remote().result(timeout_s=120)
    return jobs


@pytest.fixture(scope="module")
def pcm_seconds(ray_server: RunningServer) -> float:
    """TEXT's duration as raw PCM: espeak-ng's timing is deterministic."""
    with sdk_client(ray_server) as client:
        body = client.audio.speech.create(**speech(TEXT)).content
    return decode_audio(body, "pcm").duration


# The replica encodes with the local workers' encoders, whose every format e2e/test_streaming.py
# and tests/audio/ check: through Ray, raw PCM, one lossy codec, and Opus at its own rate.
@pytest.mark.parametrize("fmt", [AudioFormat.PCM, AudioFormat.MP3, AudioFormat.OPUS])
def test_formats_are_spoken_through_ray(
    client: openai.OpenAI, fmt: AudioFormat, pcm_seconds: float
) -> None:
    response = client.audio.speech.create(
        model="espeak", voice="alloy", input=TEXT, response_format=fmt.value
    )
    assert response.response.headers["content-type"] == fmt.content_type
    audio = decode_audio(response.content, fmt.value)
    assert audio.sample_rate == (48000 if fmt is AudioFormat.OPUS else 24000)
    assert audio.duration == pytest.approx(pcm_seconds, rel=0.05)
    assert audio.rms > 0.01


def test_audio_streams_while_the_replica_is_still_speaking(
    client: openai.OpenAI, ray_server: RunningServer
) -> None:
    pool = pool_of(ray_server, "fake")
    with client.audio.speech.with_streaming_response.create(
        model="fake", voice="alloy", input=MEDIUM, response_format="mp3"
    ) as response:
        # The first audio is here while the replica still has the rest of the text to speak.
        parts, speaking_at_first_audio = read_streamed(
            response.iter_bytes(), lambda: pool.stats().in_flight == 1
        )
    assert len(parts) > 3
    assert speaking_at_first_audio
    assert decode_audio(b"".join(parts), "mp3").duration > 20


def test_a_client_that_leaves_cancels_its_job_and_the_next_is_served(
    ray_server: RunningServer,
) -> None:
    pool = pool_of(ray_server, "fake")
    before = replica_jobs(pool)
    with httpx.stream(
        "POST", f"{ray_server.url}/v1/audio/speech", json=speech(LONG, model="fake"), timeout=60
    ) as response:
        next(response.iter_bytes())
    # Leaving the block closed the connection mid-stream: the replica's job stops.
    after = replica_jobs(pool)
    assert after["cancelled"] - before["cancelled"] == 1
    assert after["completed"] == before["completed"]
    served = httpx.post(
        f"{ray_server.url}/v1/audio/speech", json=speech(TEXT, model="fake"), timeout=60
    )
    assert served.status_code == 200
    assert decode_audio(served.content, "pcm").rms > 0.01
    assert replica_jobs(pool)["completed"] - after["completed"] == 1
    wait_for(lambda: pool.stats().in_flight == 0)
    assert pool.stats().jobs["cancelled"] >= 1


def test_a_burst_beyond_rays_queue_is_answered_429_with_retry_after(
    ray_server: RunningServer,
) -> None:
    pool = pool_of(ray_server, "fake")

    def refused() -> int:  # by Ray's queue bound, or before that by the predicted wait
        return pool.stats().rejected["queue_full"] + pool.stats().rejected["predicted_wait"]

    rejected_before = refused()

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=120) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        f"{ray_server.url}/v1/audio/speech", json=speech(MEDIUM, model="fake")
                    )
                    for _ in range(6)
                )
            )

    responses = asyncio.run(burst())
    statuses = [r.status_code for r in responses]
    assert set(statuses) == {200, 429}
    for response in responses:
        if response.status_code == 429:
            assert int(response.headers["retry-after"]) >= 1
            assert int(response.headers["retry-after-ms"]) >= 1
            error = response.json()["error"]
            assert (error["type"], error["code"]) == ("rate_limit_error", "queue_full")
        else:
            assert decode_audio(response.content, "pcm").duration > 20
    assert refused() - rejected_before == statuses.count(429)


def test_a_replica_killed_mid_stream_cuts_the_stream_and_ray_replaces_it(
    ray_server: RunningServer,
) -> None:
    pool = pool_of(ray_server, "fake")
    before = pool.stats()
    killed: list[int] = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST",
            f"{ray_server.url}/v1/audio/speech",
            json=speech(LONG, model="fake"),
            timeout=60,
        ) as response,
    ):
        assert response.status_code == 200
        for _ in response.iter_bytes():
            if not killed:
                killed = pool.running_pids()
                os.kill(killed[0], signal.SIGKILL)
    after = pool.stats()
    assert after.jobs["lost"] - before.jobs["lost"] == 1
    assert after.restarts - before.restarts == 1
    # Ray starts a new replica; the next request waits in its queue for it.
    served_by: list[int] = []
    body = b""
    with (
        sdk_client(ray_server) as client,
        client.audio.speech.with_streaming_response.create(
            **speech(TEXT, model="fake")
        ) as streamed,
    ):
        for part in streamed.iter_bytes():
            served_by = served_by or pool.running_pids()
            body += part
    assert decode_audio(body, "pcm").rms > 0.01
    assert served_by and served_by != killed
    wait_for(lambda: pool.stats().live == 1)
    assert httpx.get(f"{ray_server.url}/readyz", timeout=10).json()["ready"] is True


def test_a_request_on_a_frozen_replica_that_is_killed_goes_to_its_replacement(
    ray_server: RunningServer,
) -> None:
    # Serve hands a request over only once the replica accepts it; one that a replica never
    # took up is routed again when that replica dies. (Once a replica has taken a job, its
    # death ends the job: see the test above, and tests/workers/test_ray_pool.py for the
    # JSON 503 when no audio was sent yet.)
    pool = pool_of(ray_server)
    pid = replica_pid(ray_server)
    os.kill(pid, signal.SIGSTOP)
    try:

        async def kill_once_sent() -> httpx.Response:
            async with httpx.AsyncClient(timeout=60) as client:
                request = asyncio.create_task(
                    client.post(f"{ray_server.url}/v1/audio/speech", json=speech(TEXT))
                )
                await until(lambda: pool.stats().queued > 0)
                os.kill(pid, signal.SIGKILL)
                return await request

        response = asyncio.run(kill_once_sent())
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert response.status_code == 200
    assert decode_audio(response.content, "pcm").rms > 0.01
    assert replica_pid(ray_server) != pid


def replica_pid(server: RunningServer) -> int:
    """The replica's process, seen while it streams a job."""
    pool = pool_of(server)
    pids: list[int] = []
    with httpx.stream(
        "POST", f"{server.url}/v1/audio/speech", json=speech(TEXT), timeout=60
    ) as response:
        for _ in response.iter_bytes():
            pids = pids or pool.running_pids()
    assert len(pids) == 1
    return pids[0]


def test_two_gateways_on_one_cluster_share_its_replicas_and_one_keys_rate_limit(
    ray_server: RunningServer, postgres_server: str, redis_server: str
) -> None:
    settings = make_settings(
        engines=["espeak"],
        default_engine="espeak",
        pool={"backend": "ray", "queue_size": 1},
        ray={"replicas": 1},
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": fresh_database(postgres_server), "limits_url": redis_server},
    )
    before = replica_jobs(pool_of(ray_server))["completed"]
    with running_server(settings) as first, running_server(settings) as second:
        # Both use the replica the module's server deployed; neither deploys its own.
        assert {pool_of(first).app, pool_of(second).app} == {pool_of(ray_server).app}
        _, secret = new_key(first, requests_per_second=0.001, burst=3)
        outcomes = [attempt((first, second)[n % 2], secret, "espeak") for n in range(6)]
    admitted = [outcome for outcome in outcomes if isinstance(outcome, dict)]
    refused = [outcome for outcome in outcomes if not isinstance(outcome, dict)]
    assert [h["x-ratelimit-remaining-requests"] for h in admitted] == ["2", "1", "0"]
    assert [error.status_code for error in refused] == [429, 429, 429]
    assert all(int(error.response.headers["retry-after"]) > 900 for error in refused)
    # The three admitted ones ran on the shared replica, by its own count ...
    assert replica_jobs(pool_of(ray_server))["completed"] == before + 3
    # ... which the two gateways, having attached to it, left running when they stopped.
    with sdk_client(ray_server) as client:
        assert decode_audio(client.audio.speech.create(**speech(TEXT)).content, "pcm").rms > 0
