"""A supervised pool of engine worker processes behind an admission queue.

Each worker is a process with its own engine, pinned to its own cores, running one job at a
time. Parallelism is elastic: a job that runs alone in the pool gets every core (its worker's
threads are moved onto them and the engine told to compute that wide), and is narrowed back to
its worker's own cores the moment another job starts, so one client gets the whole machine and
a full queue gets one job per core.

The gateway talks to each worker over a pipe read by the event loop (`add_reader`), so the loop
never blocks on synthesis. Workers that die are restarted (with back-off when they die while
starting); a job whose worker dies ends with `WorkerLost`, never a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import socket
import time
from collections.abc import AsyncGenerator, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineConfig, EngineInfo, SynthesisRequest
from speechgate.errors import EngineFailed, NotReady, SlowReader, SpeechgateError, WorkerLost
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.workers import wire
from speechgate.workers.admission import Admission, ServiceTimes, safety_wait
from speechgate.workers.affinity import confine
from speechgate.workers.base import PoolStats, StartupError, WorkerState
from speechgate.workers.cores import SharedCores
from speechgate.workers.messages import (
    Cancel,
    Chunk,
    Cloned,
    CloneJob,
    Done,
    Failed,
    FromWorker,
    Job,
    Ready,
    Shutdown,
    StartupFailed,
    ToWorker,
    Width,
)
from speechgate.workers.process import worker_main

log = logging.getLogger(__name__)

# `spawn`, not `fork`: the gateway runs an event loop and threads (uvicorn, onnxruntime), and a
# forked child would inherit their locks mid-flight; engines also load cleanly in a fresh
# interpreter, which is what a restart after a crash needs.
_CONTEXT = multiprocessing.get_context("spawn")

_MAX_BACKOFF = 30.0
# Chunks (a segment's audio each, at most) buffered per job before the worker is paused.
_INBOX_CHUNKS = 4
_CRASH_LOOP = 3  # consecutive start-up failures after which /readyz reports a crash loop


@dataclass(eq=False)
class _Job:
    job_id: int
    started: float
    characters: int  # of text to speak; 0 for a cloning job
    audio_seconds: float = 0.0
    inbox: asyncio.Queue[FromWorker | SpeechgateError] = field(default_factory=asyncio.Queue)
    # Set while the inbox has room. The worker's reader waits for it, which stops reading
    # the socket, which blocks the worker's sends: a slow listener slows synthesis down
    # instead of growing the gateway's memory.
    room: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False
    abandoned: bool = False  # the consumer left; whatever still comes is dropped
    error: SpeechgateError | None = None  # what to report if the worker is killed
    # Called with False when the worker is paused for the reader, True when it may go on.
    on_room: Callable[[bool], None] = lambda _: None

    def __post_init__(self) -> None:
        self.room.set()

    def deliver(self, message: FromWorker | SpeechgateError) -> None:
        if not self.abandoned:
            self.inbox.put_nowait(message)
            if self.inbox.qsize() >= _INBOX_CHUNKS and self.room.is_set():
                self.room.clear()
                self.on_room(False)

    async def next(self) -> FromWorker | SpeechgateError:
        message = await self.inbox.get()
        if self.inbox.qsize() < _INBOX_CHUNKS:
            self._open()
        return message

    def abandon(self) -> None:
        self.abandoned = True
        self._open()

    def _open(self) -> None:
        if not self.room.is_set():
            self.room.set()
            self.on_room(True)


class _Clocks:
    """A job's two bounds: its synthesis time (`job_timeout`), which runs only while its worker
    may send, and its reader's idleness (`slow_reader_timeout`), which runs only while the
    worker is paused because the reader has not taken what is waiting."""

    def __init__(
        self,
        synthesis: float,
        slow_reader: float,
        on_synthesis_timeout: Callable[[], None],
        on_slow_reader: Callable[[], None],
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._left = synthesis
        self._slow_reader = slow_reader
        self._on_synthesis_timeout = on_synthesis_timeout
        self._on_slow_reader = on_slow_reader
        self._resumed = self._loop.time()
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(
            synthesis, on_synthesis_timeout
        )

    def room(self, open: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
        now = self._loop.time()
        if open:
            self._resumed = now
            self._timer = self._loop.call_later(self._left, self._on_synthesis_timeout)
        else:
            self._left = max(0.0, self._left - (now - self._resumed))
            self._timer = self._loop.call_later(self._slow_reader, self._on_slow_reader)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


@dataclass(eq=False)
class _Worker:
    index: int
    cpus: tuple[int, ...]
    state: WorkerState = WorkerState.STOPPED
    process: BaseProcess | None = None
    writer: asyncio.StreamWriter | None = None
    reader: asyncio.Task[None] | None = None
    job: _Job | None = None
    failures: int = 0  # consecutive deaths before becoming ready
    wide: bool = False  # its threads are on every core of the pool, not only its own
    ready: asyncio.Future[EngineInfo] | None = None  # only while the pool first starts

    def send(self, message: ToWorker) -> None:
        # Buffered by the transport: never blocks the loop, even if the worker is stuck.
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(wire.encode(message))


def assign_cpus(workers: int, cores_per_worker: int, cores: Sequence[int]) -> list[tuple[int, ...]]:
    """Give each worker its own `cores_per_worker` cores, wrapping around when there are too few."""
    return [
        tuple(cores[(index * cores_per_worker + k) % len(cores)] for k in range(cores_per_worker))
        for index in range(workers)
    ]


class WorkerPool:
    """Worker processes for one engine. Use from one event loop: `start`, `synthesize` or
    `clone`, `close`."""

    def __init__(
        self,
        config: EngineConfig,
        workers: int,
        *,
        queue_size: int,
        max_queue_wait: float,
        job_timeout: float,
        slow_reader_timeout: float = 60.0,
        cores: Sequence[int] | None = None,
        shared_cores: SharedCores | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`shared_cores`: what the other local pools on the same cores joined (a job is
        alone only if it is alone in all of them); default: this pool's cores are its own."""
        self.config = config
        self._job_timeout = job_timeout
        self._slow_reader_timeout = slow_reader_timeout
        self._clocks: dict[_Job, _Clocks] = {}
        self._clock = clock
        cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
        self._cores = tuple(cores)
        # Elastic only where a lone job has more to gain than its own cores.
        self._wide_threads = max(config.widths)
        self._elastic = self._wide_threads > config.threads and len(cores) > config.threads
        self._shared_cores = shared_cores or SharedCores()
        self._shared_cores.join(self)
        self._workers = [
            _Worker(index, cpus)
            for index, cpus in enumerate(assign_cpus(workers, config.threads, cores))
        ]
        self.service_times = ServiceTimes()
        self._admission: Admission[_Worker] = Admission(
            queue_size,
            max_queue_wait,
            self._live_workers,
            self.service_times,
            clock,
            rank=lambda worker: worker.index,
            safety_wait=safety_wait(max_queue_wait, job_timeout),
        )
        self._job_ids = itertools.count(1)
        self._restarts = 0
        self._outcomes = dict.fromkeys(("completed", "cancelled", "failed", "lost"), 0)
        self._closing = False
        self.info: EngineInfo | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> EngineInfo:
        """Start every worker and wait until all have loaded the engine."""
        loop = asyncio.get_running_loop()
        for worker in self._workers:
            worker.ready = loop.create_future()
            self._spawn(worker)
        results = await asyncio.gather(
            *(w.ready for w in self._workers if w.ready), return_exceptions=True
        )
        for worker in self._workers:
            worker.ready = None
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.close()
            raise StartupError(f"engine {self.config.name!r} failed to start: {errors[0]}")
        assert self.info is not None
        return self.info

    async def close(self) -> None:
        """Stop every worker: politely, then by force."""
        self._closing = True
        loop = asyncio.get_running_loop()
        for worker in self._workers:
            # A job still held back for a consumer that is gone (one cut off by the shutdown
            # grace) would keep its reader waiting for room, and this close, for ever.
            if worker.job is not None:
                worker.job.abandon()
            worker.send(Shutdown())
        for worker in self._workers:
            process = worker.process
            if process is not None:
                await loop.run_in_executor(None, process.join, 2.0)
                if process.is_alive():
                    process.kill()
                    await loop.run_in_executor(None, process.join)
            # The process is gone, so its reader ends at the end of the stream.
            if worker.reader is not None:
                await asyncio.gather(worker.reader, return_exceptions=True)
            worker.state = WorkerState.STOPPED

    # --- the operations --------------------------------------------------------------------

    async def synthesize(
        self, request: SynthesisRequest, output: OutputSpec, retry_key: Hashable | None = None
    ) -> AsyncGenerator[EncodedChunk]:
        """Admit the request, run it on a worker and yield its audio as the worker encodes it.

        Closing the iterator early (client gone) cancels the job inside the worker.
        """
        async with contextlib.aclosing(
            self._run(
                lambda job_id, threads: Job(job_id, request, output, threads),
                len(request.text),
                retry_key=retry_key,
            )
        ) as messages:
            async for message in messages:
                if isinstance(message, Chunk):
                    yield message.audio

    async def clone(self, prompt: PcmChunk) -> bytes:
        """Admit a cloning job, like a speech job, and return the voice state it computes."""
        state = b""
        work = self.service_times.clone_work(prompt.duration)
        job = self._run(lambda job_id, threads: CloneJob(job_id, prompt, threads), 0, work)
        async with contextlib.aclosing(job) as run:
            async for message in run:
                if isinstance(message, Cloned):
                    state = message.state
        return state

    async def _run(
        self,
        job_message: Callable[[int, int], ToWorker],
        characters: int,
        work: float | None = None,
        retry_key: Hashable | None = None,
    ) -> AsyncGenerator[FromWorker]:
        """Admit a job of `work` characters (default: `characters`, those it speaks), send it
        to a worker (`job_message(job_id, threads)`) and yield what it answers until the job
        ends."""
        if not self._live_workers():
            raise NotReady(f"no {self.config.name} worker is running")
        worker = await self._admission.acquire(characters if work is None else work, retry_key)
        threads = self._place(worker)
        job = _Job(next(self._job_ids), self._clock(), characters)
        worker.job = job
        worker.state = WorkerState.BUSY
        clocks = self._clocks[job] = _Clocks(
            self._job_timeout,
            self._slow_reader_timeout,
            lambda: self._time_out(worker, job),
            lambda: self._drop_slow_reader(worker, job),
        )
        job.on_room = clocks.room
        worker.send(job_message(job.job_id, threads))
        try:
            while True:
                message = await job.next()
                if isinstance(message, Done):
                    return
                if isinstance(message, Failed):
                    raise EngineFailed(f"{self.config.name} job failed: {message.message}")
                if isinstance(message, SpeechgateError):
                    raise message
                yield message
        finally:
            job.abandon()
            if not job.ended and worker.job is job:
                # The worker answers with Done(cancelled) and is released then.
                worker.send(Cancel(job.job_id))

    # --- observation ---------------------------------------------------------------------------

    def stats(self) -> PoolStats:
        states = dict.fromkeys(WorkerState, 0)
        for worker in self._workers:
            states[worker.state] += 1
        return PoolStats(
            workers=states,
            queued=self._admission.queued,
            in_flight=states[WorkerState.BUSY],
            live=self._live_workers(),
            restarts=self._restarts,
            crash_looping=any(w.failures >= _CRASH_LOOP for w in self._workers),
            jobs=dict(self._outcomes),
            rejected=dict(self._admission.rejected),
            reserved=self._admission.reserved,
        )

    def worker_pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if w.process and w.process.pid]

    # --- supervision ---------------------------------------------------------------------------

    def _live_workers(self) -> int:
        return sum(w.state in (WorkerState.IDLE, WorkerState.BUSY) for w in self._workers)

    def _spawn(self, worker: _Worker) -> None:
        if self._closing:
            return
        loop = asyncio.get_running_loop()
        parent, child = socket.socketpair()
        process = _CONTEXT.Process(
            target=worker_main,
            args=(self.config, child, worker.cpus),
            name=f"speechgate-{self.config.name}-{worker.index}",
            daemon=True,
        )
        process.start()
        # Our copy of the child's end must go, or the socket never reports the child's death.
        child.close()
        worker.process = process
        worker.wide = False  # a new process pins itself to its own cores
        worker.state = WorkerState.STARTING
        worker.reader = loop.create_task(self._read(worker, parent))

    async def _read(self, worker: _Worker, sock: socket.socket) -> None:
        """Dispatch the worker's messages until its end of the socket closes (it died)."""
        reader, worker.writer = await asyncio.open_unix_connection(sock=sock)
        try:
            while True:
                if worker.job is not None:
                    await worker.job.room.wait()
                self._dispatch(worker, await wire.read_message(reader))  # type: ignore[arg-type]
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        self._on_death(worker)

    def _dispatch(self, worker: _Worker, message: FromWorker) -> None:
        if isinstance(message, Ready):
            self.info = self.info or message.info
            worker.failures = 0
            if worker.ready and not worker.ready.done():
                worker.ready.set_result(message.info)
            self._release(worker)
        elif isinstance(message, StartupFailed):
            log.error(
                "%s worker %d failed to start: %s", self.config.name, worker.index, message.message
            )
            if worker.ready and not worker.ready.done():
                worker.ready.set_exception(StartupError(message.message))
        elif worker.job is not None and message.job_id == worker.job.job_id:
            job = worker.job
            job.deliver(message)
            if isinstance(message, Chunk):
                job.audio_seconds += message.audio.audio_seconds
            if isinstance(message, Done | Failed):
                self._end_job(worker, job)
                if isinstance(message, Failed):
                    self._outcomes["failed"] += 1
                elif message.cancelled:
                    self._outcomes["cancelled"] += 1
                else:
                    self._outcomes["completed"] += 1
                    if job.characters and job.audio_seconds:  # a speech job, not a cloning one
                        self.service_times.record(
                            self._clock() - job.started, job.audio_seconds, job.characters
                        )
                self._release(worker)

    def _release(self, worker: _Worker) -> None:
        worker.state = WorkerState.IDLE
        self._admission.release(worker)
        # The one job left, if one is, has the machine to itself now.
        self._shared_cores.widen_lone()

    # --- elastic parallelism -------------------------------------------------------------------

    @property
    def jobs(self) -> int:
        return self._admission.serving + self._admission.queued

    def narrow_all(self) -> None:
        for worker in self._workers:
            self._set_width(worker, wide=False)

    def widen_lone(self) -> None:
        running = [worker for worker in self._workers if worker.job is not None]
        if self._elastic and len(running) == 1:
            self._set_width(running[0], wide=True)

    def _place(self, worker: _Worker) -> int:
        """Put the job about to start on `worker` on its cores, and return its thread count:
        every core if it is the only job in every pool, else its worker's own (narrowing any
        job that had them all)."""
        if not self._elastic:
            return self.config.threads
        alone = self._shared_cores.jobs() == 1
        if not alone:
            self._shared_cores.narrow_all()
        self._set_width(worker, wide=alone)
        return self._wide_threads if alone else self.config.threads

    def _set_width(self, worker: _Worker, wide: bool) -> None:
        """Move `worker`'s threads onto every core (`wide`) or its own, and tell its running
        job, if any, how many threads to compute with from its next step."""
        if worker.wide == wide or worker.process is None or worker.process.pid is None:
            return
        confine(worker.process.pid, self._cores if wide else worker.cpus)
        worker.wide = wide
        if worker.job is not None:
            threads = self._wide_threads if wide else self.config.threads
            worker.send(Width(worker.job.job_id, threads))

    def _end_job(self, worker: _Worker, job: _Job) -> None:
        job.ended = True
        clocks = self._clocks.pop(job, None)
        if clocks is not None:
            clocks.cancel()
        # The clocks' callbacks hold the job, and the job their `room`: unlinked, an ended
        # job (its queue, events and the pool's lambdas) is freed at once. Left in that cycle,
        # each waited for a full collection of the cyclic GC, which a busy gateway runs
        # rarely: its memory crept up by a few KB a request in the meantime.
        job.on_room = _Job.on_room
        worker.job = None

    def _time_out(self, worker: _Worker, job: _Job) -> None:
        if worker.job is job and worker.process is not None:
            log.error(
                "%s worker %d: job exceeded %g s, killing it",
                self.config.name,
                worker.index,
                self._job_timeout,
            )
            job.error = EngineFailed(
                f"synthesis did not finish within {self._job_timeout:g} s", code="job_timeout"
            )
            worker.process.kill()

    def _drop_slow_reader(self, worker: _Worker, job: _Job) -> None:
        if worker.job is not job:
            return
        log.warning(
            "%s worker %d: the reader took nothing for %g s, cancelling its job",
            self.config.name,
            worker.index,
            self._slow_reader_timeout,
        )
        # Told after what is already waiting for it; then the worker reads on (dropping the
        # rest) until it answers the Cancel, and is free again.
        job.inbox.put_nowait(
            SlowReader(
                f"The client read no audio for {self._slow_reader_timeout:g} s.",
            )
        )
        job.abandon()
        worker.send(Cancel(job.job_id))

    def _on_death(self, worker: _Worker) -> None:
        was_starting = worker.state is WorkerState.STARTING
        self._detach(worker)
        self._admission.discard(worker)
        if worker.job is not None:
            job = worker.job
            self._end_job(worker, job)
            self._outcomes["lost"] += 1
            job.deliver(job.error or WorkerLost())
        if self._closing:
            worker.state = WorkerState.STOPPED
            return
        if worker.ready is not None and not worker.ready.done():
            # Died before Ready during the pool's first start: that is a start-up failure.
            worker.ready.set_exception(StartupError("worker exited while loading its engine"))
            worker.state = WorkerState.STOPPED
            return
        self._restarts += 1
        worker.failures = worker.failures + 1 if was_starting else 0
        delay = 0.0 if not worker.failures else min(_MAX_BACKOFF, 0.5 * 2 ** (worker.failures - 1))
        log.warning(
            "%s worker %d died; restarting in %.1f s", self.config.name, worker.index, delay
        )
        worker.state = WorkerState.RESTARTING
        asyncio.get_running_loop().call_later(delay, self._spawn, worker)

    def _detach(self, worker: _Worker) -> None:
        if worker.writer is not None:
            worker.writer.close()
            worker.writer = None
        process = worker.process
        if process is not None and not self._closing:
            # Reap the exited child off the loop; it has closed its socket, so this is quick.
            reaped = asyncio.get_running_loop().run_in_executor(None, process.join)
            reaped.add_done_callback(
                lambda _: log.warning(
                    "%s worker %d (pid %s) exited with code %s",
                    self.config.name,
                    worker.index,
                    process.pid,
                    process.exitcode,
                )
            )
