"""The code that runs inside a worker process: load the engine once, then serve the jobs the
gateway gives it, several at once, one step at a time.

A step is one segment of a job's speech or a whole cloning job; steps never overlap, so
engines that are not thread-safe stay safe. Between steps the worker picks a job that has sent
nothing yet first, so a new request's first audio never waits for another's long text, then
fairly between senders (`Job.group`). Messages are read on a thread of their own, so a Cancel
stops the running step's onnxruntime runs at once rather than after the sentence.
"""

from __future__ import annotations

import contextlib
import gc
import os
import queue
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass

from speechgate.audio.formats import AudioFormat
from speechgate.engines.base import (
    Engine,
    EngineConfig,
    EngineInfo,
    SynthesisRequest,
    VoiceCloner,
    estimated_speed,
)
from speechgate.engines.onnx_session import RUNS
from speechgate.lanes import Lanes
from speechgate.pipeline import OutputSpec, render
from speechgate.text.segment import SegmentLimits
from speechgate.workers import wire
from speechgate.workers.affinity import confine
from speechgate.workers.messages import (
    Cancel,
    Chunk,
    Cloned,
    CloneJob,
    Done,
    Failed,
    FromWorker,
    Heartbeat,
    Job,
    Pause,
    Ready,
    Resume,
    Shutdown,
    StartupFailed,
    ToWorker,
    WarmUp,
    Width,
)

# For libraries a worker imports itself (a Ray replica); engines set their threads explicitly.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# Spoken before Ready: the cold run is paid here rather than by the first client, and timing
# it gives admission a measured speed from the start. One sentence: an engine's speed per
# character is the same over one as over two, and a worker is ready that much sooner.
_WARM_UP_TEXT = "The quick brown fox jumps over the lazy dog."


def limit_threads(threads: int) -> None:
    """Cap the engine's compute threads; call before the engine (and its libraries) load."""
    for variable in _THREAD_VARIABLES:
        os.environ[variable] = str(threads)


def worker_main(
    config: EngineConfig, conn: socket.socket, cpus: Sequence[int], heartbeat: float = 2.0
) -> None:
    """Entry point of a worker process, forked from the fork server. `heartbeat`: seconds
    between its `Heartbeat`s."""
    # Ctrl-C reaches the whole process group; the gateway decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cpus:
        # Every thread: some exist already (the interpreter's, imports').
        confine(os.getpid(), cpus)
    limit_threads(config.threads)

    from speechgate.engines import load_engine
    from speechgate.text import normalize

    # Read in the fork server already (workers/fork_preload.py); here for a worker forked by
    # one that did not preload them.
    normalize.warm_all()
    try:
        engine = load_engine(config)
    except Exception as error:
        wire.send(conn, StartupFailed(f"{type(error).__name__}: {error}"))
        return
    warm_up = _warm_up(engine)
    # Start every thread before Ready: after it the gateway may move them between cores, and a
    # thread started during a move could be missed.
    lanes = Lanes(engine, config.widths)
    jobs = _Jobs(engine, conn, lanes)
    threading.Thread(
        target=_beat, args=(jobs, heartbeat), name="speechgate-heartbeat", daemon=True
    ).start()
    jobs.send(Ready(EngineInfo.of(engine), warm_up))
    try:
        jobs.serve()
    except (EOFError, OSError):
        return  # the gateway is gone
    finally:
        lanes.close()
        with contextlib.suppress(Exception):
            engine.close()
        # Spare the interpreter's teardown collections a walk over every imported object.
        gc.freeze()


def _warm_up(engine: Engine) -> WarmUp | None:
    """Speak `_WARM_UP_TEXT` in the engine's first voice and time it; None if it cannot."""
    voices = engine.voices()
    if not voices:
        return None
    request = SynthesisRequest(_WARM_UP_TEXT, voices[0].id)
    output = OutputSpec(AudioFormat.PCM, engine.sample_rate)
    started = time.perf_counter()
    try:
        audio = sum(chunk.audio_seconds for chunk in render(engine, request, output))
    except Exception:
        return None  # its first client will report what is wrong; the estimate can wait
    busy = time.perf_counter() - started
    return WarmUp(busy, audio, len(_WARM_UP_TEXT)) if busy > 0 and audio > 0 else None


def _beat(jobs: _Jobs, interval: float) -> None:
    """Tell the gateway the process lives; stops only if the process is frozen or an engine
    holds the GIL."""
    try:
        while True:
            time.sleep(interval)
            jobs.send(Heartbeat())
    except OSError:
        return  # the gateway is gone


# What a job sends, message by message, each with whether a step may end after it.
_Steps = Generator[tuple[FromWorker, bool]]


@dataclass(eq=False)
class _Active:
    job_id: int
    steps: _Steps
    sent: bool = False  # a job that has sent nothing goes first
    paused: bool = False
    busy: float = 0.0  # seconds of this worker's time
    characters: int = 0
    group: int = 0  # its sender's


class Pace:
    """Characters per second this worker's engine speaks (the engine's `Paced` estimate
    before any job): what sizes each job's first segment (`SegmentLimits.for_speed`)."""

    def __init__(self, estimate: float | None, window: int = 16) -> None:
        self._estimate = estimate
        self._recent: deque[tuple[int, float]] = deque(maxlen=window)

    def record(self, characters: int, seconds: float) -> None:
        if characters > 0 and seconds > 0:
            self._recent.append((characters, seconds))

    @property
    def characters_per_second(self) -> float | None:
        """None for an engine that is not `Paced`: its first segment is not sized."""
        if self._estimate is None:
            return None
        seconds = sum(seconds for _, seconds in self._recent)
        if not seconds:
            return self._estimate
        return sum(characters for characters, _ in self._recent) / seconds

    def limits(self) -> SegmentLimits:
        return SegmentLimits.for_speed(self.characters_per_second)


class _Inbox:
    """The gateway's messages, read on their own thread for the job loop to take between
    steps; a Cancel of the running step (or Shutdown) stops its onnxruntime runs at once."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._messages: queue.SimpleQueue[ToWorker | EOFError | OSError] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stepping: int | None = None  # the job whose step is running
        threading.Thread(target=self._read, name="speechgate-inbox", daemon=True).start()

    def pending(self) -> bool:
        return not self._messages.empty()

    def receive(self) -> ToWorker:
        """The next message; raises `EOFError` when the gateway is gone."""
        message = self._messages.get()
        if isinstance(message, EOFError | OSError):
            raise message
        return message

    @contextlib.contextmanager
    def step(self, job_id: int) -> Iterator[None]:
        """Mark job `job_id`'s step running, for a Cancel to stop."""
        with self._lock:
            self._stepping = job_id
            RUNS.allow()
        try:
            yield
        finally:
            with self._lock:
                self._stepping = None

    def _read(self) -> None:
        try:
            while True:
                message: ToWorker = wire.receive(self._conn)  # type: ignore[assignment]
                if isinstance(message, Cancel | Shutdown):
                    self._stop(None if isinstance(message, Shutdown) else message.job_id)
                self._messages.put(message)
        except (EOFError, OSError) as error:
            self._messages.put(error)

    def _stop(self, job_id: int | None) -> None:
        with self._lock:
            if self._stepping is not None and job_id in (None, self._stepping):
                RUNS.stop()


class _Jobs:
    """The jobs one worker holds, and the loop that runs them a step at a time."""

    def __init__(
        self,
        engine: Engine,
        conn: socket.socket,
        lanes: Lanes,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._engine = engine
        self._conn = conn
        self._inbox = _Inbox(conn)
        self._lanes = lanes  # the engine's width, set here only
        self._clock = clock
        self._jobs: dict[int, _Active] = {}  # in turn order: a job that steps goes last
        self._pace = Pace(estimated_speed(engine))
        # Fair order between groups in busy seconds; time a group was away is no credit.
        self._finish: dict[int, float] = {}
        self._virtual = 0.0
        self._sending = threading.Lock()  # the job loop and the heartbeat both send

    def send(self, message: FromWorker) -> None:
        with self._sending:
            wire.send(self._conn, message)

    def serve(self) -> None:
        """Run jobs until Shutdown."""
        try:
            while True:
                runnable = [job for job in self._jobs.values() if not job.paused]
                if not runnable or self._inbox.pending():
                    if not self._handle(self._inbox.receive()):
                        return
                    continue
                if not self._step(self._next(runnable)):
                    return
        finally:
            for job in self._jobs.values():
                job.steps.close()

    def _tag(self, group: int) -> float:
        return max(self._virtual, self._finish.get(group, self._virtual))

    def _next(self, runnable: list[_Active]) -> _Active:
        """The job to step now, moved to the end of the turns."""
        job = next((job for job in runnable if not job.sent), None)
        if job is None:
            job = min(runnable, key=lambda job: self._tag(job.group))  # the first in turn
        self._virtual = self._finish[job.group] = self._tag(job.group)
        del self._jobs[job.job_id]
        self._jobs[job.job_id] = job
        return job

    def _spent(self, job: _Active, seconds: float) -> None:
        job.busy += seconds
        self._finish[job.group] = self._finish.get(job.group, self._virtual) + seconds

    def _step(self, job: _Active) -> bool:
        """Run `job` to its next segment boundary (or its end). False on Shutdown."""
        while True:
            started = self._clock()
            try:
                with self._inbox.step(job.job_id):
                    message, boundary = next(job.steps)
            except StopIteration:
                self._spent(job, self._clock() - started)
                self._pace.record(job.characters, job.busy)
                self._end(job, Done(job.job_id, busy=job.busy))
                return True
            except Exception as error:
                if RUNS.stopped:  # the step's failure is its stop; the Cancel is yet to be read
                    self._end(job, Done(job.job_id, cancelled=True, busy=job.busy))
                else:
                    self._end(job, Failed(job.job_id, f"{type(error).__name__}: {error}"))
                return True
            self._spent(job, self._clock() - started)
            self.send(message)
            job.sent = True
            if boundary:
                return True
            # A Cancel stops the job at its next chunk; a Pause waits for the boundary, as a
            # segment cannot be set aside half done.
            while self._inbox.pending():
                if not self._handle(self._inbox.receive()):
                    return False
            if job.job_id not in self._jobs:
                return True

    def _handle(self, message: ToWorker) -> bool:
        """Act on one message from the gateway; False on Shutdown."""
        if isinstance(message, Shutdown):
            for active in list(self._jobs.values()):
                self._end(active, Done(active.job_id, cancelled=True, busy=active.busy))
            return False
        if isinstance(message, Width):
            self._lanes.set_width(message.threads)
        elif isinstance(message, Job | CloneJob):
            self._lanes.set_width(message.threads)
            if isinstance(message, Job):
                steps = _speech(self._engine, message, self._lanes, self._pace.limits())
                characters, group = len(message.request.text), message.group
            else:
                steps, characters, group = _cloning(self._engine, message), 0, 0
            self._jobs[message.job_id] = _Active(
                message.job_id, steps, characters=characters, group=group
            )
        elif (job := self._jobs.get(message.job_id)) is None:
            pass  # it has ended already: nothing to do
        elif isinstance(message, Cancel):
            self._end(job, Done(job.job_id, cancelled=True, busy=job.busy))
        elif isinstance(message, Pause | Resume):
            job.paused = isinstance(message, Pause)
        return True

    def _end(self, job: _Active, message: Done | Failed) -> None:
        del self._jobs[job.job_id]
        if all(other.group != job.group for other in self._jobs.values()):
            self._finish.pop(job.group, None)  # it comes back as a newcomer
        job.steps.close()
        self.send(message)


def _speech(engine: Engine, job: Job, lanes: Lanes, limits: SegmentLimits) -> _Steps:
    chunks = render(engine, job.request, job.output, lanes=lanes, limits=limits)
    with contextlib.closing(chunks):
        for audio in chunks:
            yield Chunk(job.job_id, audio), audio.between_segments


def _cloning(engine: Engine, job: CloneJob) -> _Steps:
    """One step: computing a voice state cannot be split."""
    if not isinstance(engine, VoiceCloner):
        raise ValueError(f"engine {engine.name!r} cannot clone voices")
    yield Cloned(job.job_id, engine.clone(job.prompt)), False
