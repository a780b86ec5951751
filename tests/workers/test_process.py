"""The worker's job loop (`speechgate.workers.process`), driven over a socket pair in-process."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from speechgate.audio.formats import AudioFormat
from speechgate.engines.base import SynthesisRequest
from speechgate.lanes import Lanes
from speechgate.pipeline import OutputSpec
from speechgate.workers import wire
from speechgate.workers.messages import Chunk, Done, Failed, FromWorker, Job, Shutdown, Width
from speechgate.workers.process import _Jobs
from tests.helpers.lanes import PAIR, TEXT, Recorder


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
