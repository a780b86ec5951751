"""Admission control, cancellation and supervision, seen from HTTP clients of a real server.

The pool is the subject, not the engine: the fake engine, slowed to a tenth of a second a
sentence, keeps a worker busy for as long as a test needs (a real engine's pace varies with the
machine's load); what needs a real engine or the session's two is marked `slow`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from speechgate.workers.pool import WorkerPool, WorkerState
from tests.helpers.audio import decode_audio
from tests.helpers.server import RunningServer, running_server
from tests.helpers.settings import fake_settings
from tests.helpers.waiting import until, wait_for

# Real servers and their processes are the subject: CI runs this module, the inner loop
# (`make test-fast`) does not.
pytestmark = pytest.mark.slow

# A tenth of a second a sentence: a LONG text keeps the worker busy for over a second.
SLOW_FAKE = {"fake": {"chunk_delay": "0.1"}}
# Twelve sentences: long enough that a burst of requests all arrive while the first is still
# running.
LONG = " ".join(
    f"This is sentence number {n} of a long passage that keeps the worker busy." for n in range(12)
)
SHORT = "Short and sweet."
# For a job that is cancelled: minutes of speech (seconds of work), so that on a loaded machine
# too it is still running when the next request arrives (the socket and loopback buffers
# swallow megabytes before a reader that stopped reading holds the worker back).
ENDLESS = " ".join([LONG] * 4)  # 3,463 characters: ~3 minutes of speech


def speech(text: str, **extra: object) -> dict[str, object]:
    return {"model": "fake", "voice": "alloy", "input": text, "response_format": "wav", **extra}


# One job at a time on the one worker: the queue behind it is the subject.
ONE_JOB = {"jobs_per_worker": 1}


@pytest.fixture
def one_worker() -> Iterator[RunningServer]:
    # A predicted wait this long is never reached: only the queue's count bound refuses.
    settings = fake_settings(
        pool={"queue_size": 2, "max_queue_wait": 3600, **ONE_JOB}, engine_options=SLOW_FAKE
    )
    with running_server(settings) as server:
        yield server


def pool_of(server: RunningServer, engine: str = "fake") -> WorkerPool:
    return server.runtime.pools[engine]


async def burst(url: str, bodies: list[dict[str, object]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=120) as client:
        return await asyncio.gather(
            *(client.post(f"{url}/v1/audio/speech", json=body) for body in bodies)
        )


async def burst_behind(
    url: str, pool: WorkerPool, first: dict[str, object], bodies: list[dict[str, object]]
) -> list[httpx.Response]:
    """`first`'s response, then those of `bodies`, sent together once `first` is running: the
    queue behind one job is all that decides who waits and who is refused, and the queued ones
    may be short (the running one alone keeps them waiting)."""
    async with httpx.AsyncClient(timeout=120) as client:
        running = asyncio.create_task(client.post(f"{url}/v1/audio/speech", json=first))
        await until(lambda: pool.stats().in_flight > 0)
        rest = await asyncio.gather(
            *(client.post(f"{url}/v1/audio/speech", json=body) for body in bodies)
        )
        return [await running, *rest]


@pytest.mark.slow
def test_concurrent_requests_up_to_the_worker_count_all_succeed(server: RunningServer) -> None:
    # The real-time factor is reported once a job of the pool has completed: one is, here,
    # whichever test ran before on the session's server.
    assert asyncio.run(burst(server.url, [speech(SHORT, model="piper")]))[0].status_code == 200
    responses = asyncio.run(burst(server.url, [speech(SHORT, model="piper")] * 2))
    assert [r.status_code for r in responses] == [200, 200]
    for response in responses:
        assert decode_audio(response.content, "wav").rms > 0.01
        assert response.headers["x-request-id"].startswith("req_")
        ttfa = float(response.headers["x-speechgate-time-to-first-audio-ms"])
        assert ttfa > 0
        # W3C Server-Timing: the gateway's time to first audio, and the engine's share of it.
        timing = dict(
            metric.strip().split(";dur=") for metric in response.headers["server-timing"].split(",")
        )
        assert float(timing["ttfa"]) == pytest.approx(ttfa, abs=0.1)
        assert 0 < float(timing["engine"]) <= float(timing["ttfa"])
    assert float(responses[1].headers["x-speechgate-real-time-factor"]) > 0


def test_a_burst_beyond_the_queue_gets_exactly_the_admitted_ones_served(
    one_worker: RunningServer,
) -> None:
    pool = pool_of(one_worker)
    running, *responses = asyncio.run(
        burst_behind(one_worker.url, pool, speech(LONG), [speech(SHORT)] * 9)
    )
    served = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert (len(served), len(refused)) == (2, 7)  # two queued behind the running one
    for response in refused:
        assert int(response.headers["retry-after"]) >= 1
        assert int(response.headers["retry-after-ms"]) >= 1
        error = response.json()["error"]
        assert (error["type"], error["code"]) == ("rate_limit_error", "queue_full")
    assert running.status_code == 200
    assert decode_audio(running.content, "wav").duration > 10
    for response in served:
        assert decode_audio(response.content, "wav").duration > 0.5
    assert pool.stats().in_flight == 0


def test_admitted_requests_wait_their_turn_even_when_slower_than_predicted() -> None:
    settings = fake_settings(
        pool={"queue_size": 3, "max_queue_wait": 0.2, **ONE_JOB}, engine_options=SLOW_FAKE
    )
    with running_server(settings) as server:
        # A wildly optimistic measurement (a real engine speaks a few hundred characters a second):
        # everyone the queue holds is admitted, then waits over a second (the running LONG's),
        # far past max_queue_wait.
        pool = pool_of(server)
        pool.service_times.record(1.0, 60.0, 1_000_000)
        running, *responses = asyncio.run(
            burst_behind(server.url, pool, speech(LONG), [speech(SHORT)] * 11)
        )
        assert running.status_code == 200
        assert decode_audio(running.content, "wav").duration > 10
        statuses = [r.status_code for r in responses]
        assert (statuses.count(200), statuses.count(429)) == (3, 8)  # three queued
        for response in responses:
            if response.status_code == 200:
                assert decode_audio(response.content, "wav").duration > 0.5
            else:
                assert int(response.headers["retry-after"]) >= 1
                assert response.json()["error"]["code"] == "queue_full"
        assert pool_of(server).stats().rejected == {
            "queue_full": 8,
            "predicted_wait": 0,
            "held_for_retry": 0,
            "queue_stalled": 0,
            "pushed_out": 0,
        }


def test_a_request_predicted_to_wait_too_long_is_refused_at_once() -> None:
    # Retries are told to come back after 6, 12 and 18 s here, twice that on a loaded machine:
    # past the default ceiling of 30 s no place is kept, which is not what this test is about.
    pool = {"queue_size": 8, "max_queue_wait": 0.2, "max_retry_after": 600, **ONE_JOB}
    settings = fake_settings(pool=pool, engine_options=SLOW_FAKE)
    with running_server(settings) as server:
        assert asyncio.run(burst(server.url, [speech(SHORT)]))[0].status_code == 200  # measured
        responses = asyncio.run(burst(server.url, [speech(LONG)] * 4))
        statuses = [r.status_code for r in responses]
        # Each LONG takes over a second: nobody can start behind one within 0.2 s.
        assert sorted(statuses) == [200, 429, 429, 429]
        for response in responses:
            if response.status_code == 429:
                assert response.json()["error"]["code"] == "queue_full"
                assert int(response.headers["retry-after"]) >= 1
        assert pool_of(server).stats().rejected["predicted_wait"] == 3
        # Each refused one (from one address, with one body) keeps a place for its retry.
        assert pool_of(server).stats().reserved == 3


def test_a_short_request_is_heard_while_a_long_one_streams_on_the_same_worker() -> None:
    # The defaults: one worker holds several jobs, each spoken a sentence at a time.
    settings = fake_settings(engine_options=SLOW_FAKE)

    async def scenario(url: str) -> tuple[list[str], httpx.Response]:
        events: list[str] = []
        async with httpx.AsyncClient(timeout=60) as client:
            # The engine's speed measured: fast enough for its worker to be shared.
            (await client.post(f"{url}/v1/audio/speech", json=speech(SHORT))).raise_for_status()
            # Two dozen sentences: still speaking when the short one arrives, on a loaded
            # machine too.
            body = speech(f"{LONG} {LONG}")
            async with client.stream("POST", f"{url}/v1/audio/speech", json=body) as long:
                async for _ in long.aiter_bytes():
                    if not events:
                        short = asyncio.create_task(
                            client.post(f"{url}/v1/audio/speech", json=speech(SHORT))
                        )
                        short.add_done_callback(lambda _: events.append("short"))
                    events.append("long")
            return events, await short

    with running_server(settings) as server:
        events, short = asyncio.run(scenario(server.url))
        # Admitted at once: a free slot, not a predicted wait behind the long text.
        assert short.status_code == 200
        wait_for(lambda: pool_of(server).stats().jobs["completed"] == 3)
    assert decode_audio(short.content, "wav").duration > 0.5
    # All of the short one was out while the long one still had sentences to come.
    assert "short" in events
    assert events[-1] == "long"


def test_a_worker_killed_mid_stream_ends_the_stream_and_is_replaced(
    one_worker: RunningServer,
) -> None:
    pool = pool_of(one_worker)
    (pid,) = pool.worker_pids()
    killed = False
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST", f"{one_worker.url}/v1/audio/speech", json=speech(LONG), timeout=30
        ) as response,
    ):
        assert response.status_code == 200
        for _ in response.iter_bytes():
            if not killed:
                os.kill(pid, signal.SIGKILL)
                killed = True
    wait_for(lambda: pool.stats().workers[WorkerState.IDLE] == 1)
    assert pool.worker_pids() != [pid]
    after = httpx.post(f"{one_worker.url}/v1/audio/speech", json=speech(SHORT), timeout=30)
    assert after.status_code == 200
    stats = pool.stats()
    assert (stats.in_flight, stats.restarts, stats.jobs["lost"]) == (0, 1, 1)


def test_a_worker_killed_before_the_first_audio_is_a_json_503(one_worker: RunningServer) -> None:
    pool = pool_of(one_worker)
    (pid,) = pool.worker_pids()
    os.kill(pid, signal.SIGSTOP)  # frozen: the job is sent but never answered
    try:

        async def kill_once_admitted() -> httpx.Response:
            async with httpx.AsyncClient(timeout=30) as client:
                request = asyncio.create_task(
                    client.post(f"{one_worker.url}/v1/audio/speech", json=speech(SHORT))
                )
                await until(lambda: pool.stats().in_flight > 0)
                os.kill(pid, signal.SIGKILL)
                return await request

        response = asyncio.run(kill_once_admitted())
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "worker_lost"
    assert int(response.headers["retry-after"]) >= 1
    wait_for(lambda: pool.stats().workers[WorkerState.IDLE] == 1)


def test_sse_stream_ends_with_an_error_event_when_its_worker_dies(
    one_worker: RunningServer,
) -> None:
    pool = pool_of(one_worker)
    (pid,) = pool.worker_pids()
    lines: list[str] = []
    killed = False
    with httpx.stream(
        "POST",
        f"{one_worker.url}/v1/audio/speech",
        json=speech(LONG, stream_format="sse"),
        timeout=30,
    ) as response:
        for line in response.iter_lines():
            lines.append(line)
            if line.startswith("data:") and not killed:
                os.kill(pid, signal.SIGKILL)
                killed = True
    events = [line for line in lines if line.startswith("data:")]
    assert '"type":"speech.audio.delta"' in events[0]
    assert '"type":"error"' in events[-1] and "worker_lost" in events[-1]
    wait_for(lambda: pool.stats().workers[WorkerState.IDLE] == 1)


def test_a_client_that_leaves_stops_its_job_and_the_next_request_starts(
    one_worker: RunningServer,
) -> None:
    pool = pool_of(one_worker)

    async def scenario() -> httpx.Response:
        async with httpx.AsyncClient(timeout=60) as leaver, httpx.AsyncClient(timeout=60) as next_:
            async with leaver.stream(
                "POST", f"{one_worker.url}/v1/audio/speech", json=speech(ENDLESS)
            ) as response:
                # Held, not dropped: asyncio closes a dropped async generator, and httpx closes
                # the response with it, so the client would leave at once and, under load,
                # before the next request queued (it was then answered at once).
                chunks = response.aiter_bytes()
                await anext(chunks)
                queued = asyncio.create_task(
                    next_.post(f"{one_worker.url}/v1/audio/speech", json=speech(SHORT))
                )
                await until(lambda: pool.stats().queued > 0 or queued.done())
                assert not queued.done(), (queued.result(), pool.stats())
            # Leaving the block closed the connection mid-stream.
            return await queued

    after = asyncio.run(scenario())
    assert after.status_code == 200
    wait_for(lambda: pool.stats().in_flight == 0)
    jobs = pool.stats().jobs
    assert (jobs["cancelled"], jobs["completed"]) == (1, 1)


def test_a_queued_request_whose_client_left_never_runs(one_worker: RunningServer) -> None:
    pool = pool_of(one_worker)

    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            running = asyncio.create_task(
                client.post(f"{one_worker.url}/v1/audio/speech", json=speech(LONG))
            )
            await until(lambda: pool.stats().in_flight > 0)
            queued = asyncio.create_task(
                client.post(f"{one_worker.url}/v1/audio/speech", json=speech(SHORT))
            )
            await until(lambda: pool.stats().queued > 0)
            queued.cancel()  # the client gives up while waiting
            await asyncio.gather(queued, return_exceptions=True)
            await until(lambda: pool.stats().queued == 0)
            assert (await running).status_code == 200

    asyncio.run(scenario())
    jobs = pool.stats().jobs
    assert sum(jobs.values()) == 1 and jobs["completed"] == 1


def test_a_crash_looping_worker_backs_off_and_readyz_says_so(tmp_path: Path) -> None:
    # The fake engine with a model file to load: the supervisor is the subject, and a fake
    # worker fails its restarts in a fraction of the time a Piper one takes to import.
    model = tmp_path / "fake.model"
    model.touch()
    settings = fake_settings(engine_options={"fake": {"model": str(model)}})
    with running_server(settings) as server:
        assert httpx.get(f"{server.url}/readyz", timeout=10).json()["ready"] is True
        pool = pool_of(server)
        model.unlink()  # every restart will now fail to load
        os.kill(pool.worker_pids()[0], signal.SIGKILL)
        wait_for(lambda: pool.stats().crash_looping)
        readiness = httpx.get(f"{server.url}/readyz", timeout=10)
        assert readiness.status_code == 503
        report = readiness.json()
        assert report["ready"] is False
        assert report["engines"]["fake"]["crash_looping"] is True
        refused = httpx.post(f"{server.url}/v1/audio/speech", json=speech(SHORT), timeout=10)
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "not_ready"


@pytest.mark.slow
def test_metrics_report_requests_and_pool_state(server: RunningServer) -> None:
    piper = {"model": "piper"}
    httpx.post(f"{server.url}/v1/audio/speech", json=speech(SHORT, **piper), timeout=30)
    httpx.post(
        f"{server.url}/v1/audio/speech", json=speech(SHORT, voice="nobody", **piper), timeout=30
    )
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert value("speechgate_responses_total", route="/v1/audio/speech", status="200") >= 1
    assert value("speechgate_responses_total", route="/v1/audio/speech", status="400") >= 1
    assert value("speechgate_workers", engine="piper", state="idle") == 2
    assert value("speechgate_queue_depth", engine="piper") == 0
    assert value("speechgate_in_flight", engine="piper") == 0
    assert value("speechgate_audio_seconds_total", engine="piper") > 0
    assert value("speechgate_input_characters_total", engine="piper") >= len(SHORT)
    assert value("speechgate_time_to_first_audio_seconds_count", engine="piper") >= 1
    assert value("speechgate_real_time_factor_count", engine="piper") >= 1
    assert value("speechgate_jobs_total", engine="piper", outcome="completed") >= 1
    assert ("speechgate_worker_restarts_total", (("engine", "piper"),)) in samples
    assert (
        "speechgate_admission_rejections_total",
        (("engine", "piper"), ("reason", "queue_full")),
    ) in samples
