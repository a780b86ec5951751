"""The worker's job loop (`speechgate.workers.process`), driven over a socket pair in-process."""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import SynthesisRequest, Voice
from speechgate.engines.onnx_session import RUNS, pinned_session, stoppable
from speechgate.lanes import Lanes
from speechgate.pipeline import OutputSpec
from speechgate.text.segment import SegmentLimits
from speechgate.workers import wire
from speechgate.workers.messages import (
    Cancel,
    Chunk,
    Done,
    Failed,
    FromWorker,
    Job,
    Shutdown,
    ToWorker,
    Width,
)
from speechgate.workers.process import Pace, _Jobs
from tests.helpers.lanes import PAIR, TEXT, Recorder
from tests.helpers.onnx import endless_model


@pytest.fixture
def worker(request: pytest.FixtureRequest) -> Iterator[tuple[socket.socket, Recorder, Lanes]]:
    """A job loop on a `Recorder` engine that may be one or two threads wide (whose segments
    in `request.param` wait for each other), and the gateway's end of its socket."""
    engine = Recorder(meet=request.param)
    lanes = Lanes(engine, (1, 2))
    gateway, end = socket.socketpair()
    loop = threading.Thread(target=_Jobs(engine, end, lanes).serve)
    loop.start()
    yield gateway, engine, lanes
    wire.send(gateway, Shutdown())
    loop.join(timeout=10)
    lanes.close()
    gateway.close()
    end.close()


def _run(gateway: socket.socket, job: Job) -> list[FromWorker]:
    wire.send(gateway, job)
    messages: list[FromWorker] = []
    while not messages or not isinstance(messages[-1], Done | Failed):
        messages.append(wire.receive(gateway))  # type: ignore[arg-type]
    return messages


def _job(job_id: int, threads: int) -> Job:
    return Job(job_id, SynthesisRequest(TEXT, "v"), OutputSpec(AudioFormat.PCM, 16000), threads)


@pytest.mark.parametrize("worker", [PAIR], indirect=True)
def test_a_job_given_every_core_speaks_its_later_segments_in_pairs(
    worker: tuple[socket.socket, Recorder, Lanes],
) -> None:
    gateway, engine, lanes = worker
    messages = _run(gateway, _job(1, threads=2))
    assert isinstance(messages[-1], Done) and not messages[-1].cancelled, messages[-1]
    assert all(isinstance(message, Chunk) for message in messages[:-1])
    # The pair met at the engine's barrier: they ran at once, one thread each.
    assert lanes.pairs == 1
    assert [width for _, width, _ in engine.calls] == [2, 1, 1, 2]


@pytest.mark.parametrize("worker", [frozenset()], indirect=True)
def test_a_narrowed_job_speaks_one_segment_at_a_time(
    worker: tuple[socket.socket, Recorder, Lanes],
) -> None:
    gateway, engine, lanes = worker
    # Widened, then narrowed before its first step: as when a second job starts at once.
    wire.send(gateway, Width(2))
    messages = _run(gateway, _job(1, threads=1))
    assert isinstance(messages[-1], Done), messages[-1]
    assert lanes.pairs == 0
    assert [(width, running) for _, width, running in engine.calls] == [(1, 1)] * 4


class Endless:
    """An onnxruntime engine whose segment "Forever." runs until its run is stopped."""

    name = "endless"
    sample_rate = 16000
    supports_instructions = supports_seed = blends_voices = phonemes = False

    def __init__(self) -> None:
        self._session = stoppable(pinned_session(endless_model(), 1))

    def voices(self) -> list[Voice]:
        return [Voice("v", "v")]

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        if request.text == "Forever.":
            self._session.run(None, {"x": np.zeros(1, dtype=np.float32)})
        yield PcmChunk(np.full(1600, 1000, dtype=np.int16), self.sample_rate)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("stop", [Cancel(1), Shutdown()], ids=["cancel", "shutdown"])
def test_a_cancel_or_shutdown_stops_the_segment_under_way(stop: ToWorker) -> None:
    engine = Endless()
    gateway, end = socket.socketpair()
    gateway.settimeout(30)  # the segment has no end of its own: a stop that fails, fails here
    loop = threading.Thread(target=_Jobs(engine, end, Lanes(engine, (1,))).serve, daemon=True)
    loop.start()
    try:
        request = SynthesisRequest("Hello. Forever.", "v")
        wire.send(gateway, Job(1, request, OutputSpec(AudioFormat.PCM, 16000)))
        assert isinstance(wire.receive(gateway), Chunk)  # "Hello." then the pause after it
        while RUNS.under_way == 0 and loop.is_alive():  # until "Forever." runs
            loop.join(timeout=0.001)
        wire.send(gateway, stop)
        messages = [wire.receive(gateway)]
        while not isinstance(messages[-1], Done | Failed):
            messages.append(wire.receive(gateway))
        assert isinstance(messages[-1], Done) and messages[-1].cancelled, messages
        # The next job speaks: the stop ended that step only.
        if isinstance(stop, Cancel):
            done = _run(
                gateway, Job(2, SynthesisRequest("Hi.", "v"), OutputSpec(AudioFormat.PCM, 16000))
            )
            assert isinstance(done[-1], Done) and not done[-1].cancelled
            assert any(isinstance(message, Chunk) and message.audio.data for message in done)
            wire.send(gateway, Shutdown())
        loop.join(timeout=30)
        assert not loop.is_alive()
    finally:
        RUNS.allow()
        gateway.close()
        end.close()


class _SlowRecorder(Recorder):
    """A `Recorder` that says it speaks at about real time, as Kokoro does on one core."""

    characters_per_second = 15.0


CLAUSE_TEXT = "Well, the report is finished, and it went out today. Bye now."


@pytest.mark.parametrize(
    ("engine", "first"),
    [
        (_SlowRecorder(), "Well, the report is finished,"),
        (Recorder(), "Well, the report is finished, and it went out today."),
    ],
    ids=["paced", "unpaced"],
)
def test_a_slow_engine_s_first_segment_is_its_first_clause(engine: Recorder, first: str) -> None:
    lanes = Lanes(engine, (1,))
    gateway, end = socket.socketpair()
    loop = threading.Thread(target=_Jobs(engine, end, lanes).serve, daemon=True)
    loop.start()
    try:
        request = SynthesisRequest(CLAUSE_TEXT, "v")
        messages = _run(gateway, Job(1, request, OutputSpec(AudioFormat.PCM, 16000)))
        assert isinstance(messages[-1], Done), messages[-1]
        assert engine.calls[0][0] == first
    finally:
        wire.send(gateway, Shutdown())
        loop.join(timeout=10)
        lanes.close()
        gateway.close()
        end.close()


def test_the_pace_is_the_estimate_until_jobs_measure_it() -> None:
    assert Pace(None).limits() == SegmentLimits()
    pace = Pace(15.0)
    assert pace.limits() == SegmentLimits.for_speed(15.0)
    pace.record(300, 1.0)
    pace.record(100, 1.0)
    assert pace.characters_per_second == 200.0
    assert pace.limits() == SegmentLimits.for_speed(200.0)
    pace.record(0, 0.5)  # a job with no text measures nothing
    assert pace.characters_per_second == 200.0


def test_a_worker_shares_its_time_between_senders_not_jobs() -> None:
    """Two long jobs of one sender and one of another: after every job's first segment, the
    other sender's job gets every other step (turn by turn between jobs it would get one in
    three). On a clock that counts the engine's calls, so a step costs the same everywhere."""
    engine = Recorder()
    lanes = Lanes(engine, (1,))
    gateway, end = socket.socketpair()
    ticks = itertools.count()
    jobs = _Jobs(engine, end, lanes, clock=lambda: float(next(ticks)))
    request = SynthesisRequest(TEXT, "v")
    output = OutputSpec(AudioFormat.PCM, 16000)
    groups = {1: 7, 2: 7, 3: 9}  # job id: its sender's group
    try:
        for job_id, group in groups.items():
            jobs._handle(Job(job_id, request, output, group=group))
        stepped: list[int] = []
        while runnable := list(jobs._jobs.values()):
            job = jobs._next(runnable)
            stepped.append(job.job_id)
            assert jobs._step(job)
    finally:
        lanes.close()
        gateway.close()
        end.close()
    assert stepped[:3] == [1, 2, 3]  # each job's first segment first
    # Then job 3's segments, each after one step of the other sender's jobs.
    steps_of_3 = [index for index, job_id in enumerate(stepped) if job_id == 3]
    assert len(steps_of_3) == 4, stepped
    assert all(b - a == 2 for a, b in itertools.pairwise(steps_of_3)), stepped
