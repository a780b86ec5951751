"""A supervised pool of engine worker processes behind an admission queue.

Each worker is a process with its own engine, pinned to its own cores, running up to
`jobs_per_worker` jobs (its slots) a segment at a time, so a short request does not wait for a
long one. Parallelism is elastic: a job alone in the pool gets every core, and is narrowed
back to its worker's cores as soon as another starts.

The event loop reads each worker's socket (`add_reader`), so it never blocks on synthesis.
Workers that die are restarted (with back-off while starting) and their jobs end with
`WorkerLost`; a worker silent for `stall_timeout`, heartbeat included (frozen, or an engine
holding the GIL), is killed and its jobs end with `WorkerStalled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import time
from collections.abc import AsyncGenerator, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess

from speechgate import tracing
from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineConfig, EngineInfo, SynthesisRequest
from speechgate.errors import (
    EngineFailed,
    NotReady,
    SlowReader,
    SpeechgateError,
    WorkerLost,
    WorkerStalled,
)
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.workers import forking, wire
from speechgate.workers.admission import MAX_RETRY_AFTER, Admission, ServiceTimes, safety_wait
from speechgate.workers.affinity import confine
from speechgate.workers.cores import SharedCores
from speechgate.workers.interface import PoolStats, StartupError, WorkerState
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
    Width,
)
from speechgate.workers.process import worker_main

log = logging.getLogger(__name__)

_MAX_BACKOFF = 30.0
_INBOX_CHUNKS = 4  # buffered per job before the worker is told to pause it
_CRASH_LOOP = 3  # consecutive start-up failures after which /readyz reports a crash loop
# A worker shares its time among jobs only while each still streams this many times faster
# than real time; slower engines never share, or every listener would hear gaps.
_SHARED_SPEED = 2.0


@dataclass(eq=False)
class _Job:
    job_id: int
    slot: _Slot
    characters: int  # 0 for a cloning job
    audio_seconds: float = 0.0
    inbox: asyncio.Queue[FromWorker | SpeechgateError] = field(default_factory=asyncio.Queue)
    # A full inbox pauses this job in the worker: a slow listener slows its own synthesis
    # instead of growing the gateway's memory.
    paused: bool = False
    ended: bool = False
    abandoned: bool = False  # the consumer left; whatever still comes is dropped
    error: SpeechgateError | None = None  # what to report if the worker is killed
    on_room: Callable[[bool], None] = lambda _: None  # False: pause, True: resume
    left: float = 0.0  # seconds of its `job_timeout` not yet charged
    synthesis: asyncio.TimerHandle | None = None
    reading: asyncio.TimerHandle | None = None

    def deliver(self, message: FromWorker | SpeechgateError) -> None:
        if not self.abandoned:
            self.inbox.put_nowait(message)
            if self.inbox.qsize() >= _INBOX_CHUNKS and not self.paused:
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
        if self.paused:
            self.on_room(True)


@dataclass(eq=False)
class _Slot:
    """Room for one job on a worker: what admission hands out and takes back."""

    worker: _Worker
    index: int
    guest: bool = False  # beyond the worker's slots: for a sender the others crowd out


@dataclass(eq=False)
class _Worker:
    index: int
    cpus: tuple[int, ...]
    state: WorkerState = WorkerState.STOPPED
    process: BaseProcess | None = None
    writer: asyncio.StreamWriter | None = None
    reader: asyncio.Task[None] | None = None
    slots: list[_Slot] = field(default_factory=list)
    guest: _Slot | None = None
    jobs: dict[int, _Job] = field(default_factory=dict)  # by id, those it runs
    accounted: float = 0.0  # the loop's time up to which its jobs' synthesis is charged
    failures: int = 0  # consecutive deaths before becoming ready
    wide: bool = False  # its threads are on every core of the pool, not only its own
    ready: asyncio.Future[EngineInfo] | None = None  # only while the pool first starts
    heard: float = 0.0  # the loop's time of its last message (its heartbeat at least)

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
        jobs_per_worker: int = 1,
        cores: Sequence[int] | None = None,
        shared_cores: SharedCores | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_retry_after: float = MAX_RETRY_AFTER,
        stall_timeout: float = 15.0,
    ) -> None:
        """`shared_cores`: joined by the other local pools on the same cores (a job is alone
        only if alone in all). `stall_timeout`: seconds a ready worker may send nothing (its
        heartbeat comes every fifth of it) before it is replaced."""
        self.config = config
        self._job_timeout = job_timeout
        self._stall_timeout = stall_timeout
        self._watchdog: asyncio.TimerHandle | None = None
        self._slow_reader_timeout = slow_reader_timeout
        self._clock = clock
        cores = sorted(cores if cores is not None else os.sched_getaffinity(0))
        self._cores = tuple(cores)
        self._wide_threads = max(config.widths)
        self._elastic = self._wide_threads > config.threads and len(cores) > config.threads
        self._shared_cores = shared_cores or SharedCores()
        self._shared_cores.join(self)
        self._workers = [
            _Worker(index, cpus)
            for index, cpus in enumerate(assign_cpus(workers, config.threads, cores))
        ]
        for worker in self._workers:
            worker.slots = [_Slot(worker, index) for index in range(jobs_per_worker)]
            worker.guest = _Slot(worker, jobs_per_worker, guest=True)
        self._jobs_per_worker = jobs_per_worker
        # Slots beyond `_open_slots()`, held back until the engine proves fast enough.
        self._parked: set[_Slot] = set()
        self.service_times = ServiceTimes()
        self._admission: Admission[_Slot] = Admission(
            queue_size,
            max_queue_wait,
            lambda: self._live_workers() * self._open_slots(),
            self.service_times,
            clock,
            # Every worker's first slot before any worker's second.
            rank=lambda slot: slot.index * len(self._workers) + slot.worker.index,
            safety_wait=safety_wait(max_queue_wait, job_timeout),
            share=self._open_slots,
            max_retry_after=max_retry_after,
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
        self._watch()
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
        if self._watchdog is not None:
            self._watchdog.cancel()
        loop = asyncio.get_running_loop()
        for worker in self._workers:
            for job in worker.jobs.values():
                job.abandon()
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
        self,
        request: SynthesisRequest,
        output: OutputSpec,
        retry_key: Hashable | None = None,
        sender: Hashable = None,
    ) -> AsyncGenerator[EncodedChunk]:
        """Admit the request, run it on a worker and yield its audio as encoded. Closing the
        iterator early cancels the job inside the worker."""
        async with contextlib.aclosing(
            self._run(
                lambda job_id, threads: Job(job_id, request, output, threads, hash(sender)),
                len(request.text),
                retry_key=retry_key,
                sender=sender,
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
        sender: Hashable = None,
    ) -> AsyncGenerator[FromWorker]:
        """Admit a job of `work` characters (default `characters`), send it to a worker and
        yield what it answers until the job ends."""
        if not self._live_workers():
            raise NotReady(f"no {self.config.name} worker is running")
        self._fit_slots()
        work = characters if work is None else work
        trace = (
            tracing.job(self._queue_attributes(work, sender))
            if tracing.enabled()
            else tracing.NO_JOB
        )
        try:
            slot = await self._admission.acquire(work, retry_key, sender)
        except BaseException as error:
            trace.end(error)
            raise
        worker = slot.worker
        threads = self._place(worker)
        job = _Job(next(self._job_ids), slot, characters, left=self._job_timeout)
        self._charge(worker)
        worker.jobs[job.job_id] = job
        worker.state = WorkerState.BUSY
        self._plan_timeouts(worker)
        job.on_room = lambda open: self._set_room(worker, job, open)
        trace.admitted({"speechgate.worker": worker.index})
        worker.send(job_message(job.job_id, threads))
        failure: BaseException | None = None
        try:
            while True:
                message = await job.next()
                if isinstance(message, Done):
                    return
                if isinstance(message, Failed):
                    raise EngineFailed(f"{self.config.name} job failed: {message.message}")
                if isinstance(message, SpeechgateError):
                    raise message
                if isinstance(message, Chunk):
                    audio = message.audio
                    trace.chunk(audio.elapsed, audio.encoding, audio.audio_seconds)
                yield message
        except BaseException as error:
            failure = error
            raise
        finally:
            trace.end(failure)
            job.abandon()
            if not job.ended and worker.jobs.get(job.job_id) is job:
                self._cancel(worker, job)

    def _queue_attributes(self, work: float, sender: Hashable) -> dict[str, tracing.Value]:
        return {
            "speechgate.engine": self.config.name,
            "speechgate.work": work,
            "speechgate.predicted_wait": round(self._admission.predicted_wait(sender), 6),
            "speechgate.queued": self._admission.queued,
        }

    # --- observation ---------------------------------------------------------------------------

    def stats(self) -> PoolStats:
        states = dict.fromkeys(WorkerState, 0)
        for worker in self._workers:
            states[worker.state] += 1
        return PoolStats(
            workers=states,
            queued=self._admission.queued,
            in_flight=sum(len(worker.jobs) for worker in self._workers),
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
        process = forking.CONTEXT.Process(
            target=worker_main,
            args=(self.config, child, worker.cpus, self._stall_timeout / 5),
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
        loop = asyncio.get_running_loop()
        try:
            while True:
                message = await wire.read_message(reader)
                worker.heard = loop.time()
                self._dispatch(worker, message)  # type: ignore[arg-type]
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        self._on_death(worker)

    def _dispatch(self, worker: _Worker, message: FromWorker) -> None:
        if isinstance(message, Heartbeat):
            return
        if isinstance(message, Ready):
            self.info = self.info or message.info
            if message.warm_up is not None:
                warm = message.warm_up
                self.service_times.warm(warm.busy, warm.audio_seconds, warm.characters)
            worker.failures = 0
            if worker.ready and not worker.ready.done():
                worker.ready.set_result(message.info)
            worker.state = WorkerState.IDLE
            for slot in worker.slots:
                self._release(slot)
            if worker.guest is not None:
                self._admission.add_guest(worker.guest)
        elif isinstance(message, StartupFailed):
            log.error(
                "%s worker %d failed to start: %s", self.config.name, worker.index, message.message
            )
            if worker.ready and not worker.ready.done():
                worker.ready.set_exception(StartupError(message.message))
        elif (job := worker.jobs.get(message.job_id)) is not None:
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
                    # Worker time, not wall time, which includes the jobs it shared with.
                    if job.characters and job.audio_seconds and message.busy > 0:
                        self.service_times.record(message.busy, job.audio_seconds, job.characters)
                if not worker.jobs:
                    worker.state = WorkerState.IDLE
                self._release(job.slot)

    def _release(self, slot: _Slot) -> None:
        if slot.guest or slot.index < self._open_slots():
            self._admission.release(slot)
        else:
            self._admission.discard(slot)
            self._parked.add(slot)
        self._open_parked()
        self._shared_cores.widen_lone()

    def _fit_slots(self) -> None:
        """Park the idle slots beyond those the measured speed allows now (the warm-up's
        estimate may have opened too many), and open the parked ones it allows."""
        open_slots = self._open_slots()
        for worker in self._workers:
            for slot in worker.slots[open_slots:]:
                if slot not in self._parked and self._admission.withdraw(slot):
                    self._parked.add(slot)
        self._open_parked()

    def _open_parked(self) -> None:
        for parked in sorted(self._parked, key=lambda slot: slot.index):
            if parked.index < self._open_slots():
                self._parked.discard(parked)
                self._admission.release(parked)

    def _open_slots(self) -> int:
        """Jobs a worker may run at once now; one until a job has been timed."""
        speed = self.service_times.real_time_factor
        if speed is None:
            return 1
        return max(1, min(self._jobs_per_worker, int(speed / _SHARED_SPEED)))

    # --- elastic parallelism -------------------------------------------------------------------

    @property
    def jobs(self) -> int:
        return self._admission.serving + self._admission.queued

    def narrow_all(self) -> None:
        for worker in self._workers:
            self._set_width(worker, wide=False)

    def widen_lone(self) -> None:
        running = [worker for worker in self._workers for _ in worker.jobs]  # one per job
        if self._elastic and len(running) == 1:
            self._set_width(running[0], wide=True)

    def _place(self, worker: _Worker) -> int:
        """Place the job starting on `worker` and return its thread count: every core if it is
        the only job in every pool, else its worker's own (narrowing any wide job)."""
        if not self._elastic:
            return self.config.threads
        alone = self._shared_cores.jobs() == 1
        if not alone:
            self._shared_cores.narrow_all()
        self._set_width(worker, wide=alone)
        return self._wide_threads if alone else self.config.threads

    def _set_width(self, worker: _Worker, wide: bool) -> None:
        if worker.wide == wide or worker.process is None or worker.process.pid is None:
            return
        confine(worker.process.pid, self._cores if wide else worker.cpus)
        worker.wide = wide
        if worker.jobs:
            worker.send(Width(self._wide_threads if wide else self.config.threads))

    def _end_job(self, worker: _Worker, job: _Job) -> None:
        job.ended = True
        # Break the cycles through `on_room` and the timers, so an ended job is freed at once
        # rather than at a full cyclic GC, which a busy gateway runs rarely.
        job.on_room = _Job.on_room
        self._charge(worker)
        del worker.jobs[job.job_id]
        for timer in (job.synthesis, job.reading):
            if timer is not None:
                timer.cancel()
        job.synthesis = job.reading = None
        self._plan_timeouts(worker)

    # --- a job's bounds ------------------------------------------------------------------------

    def _set_room(self, worker: _Worker, job: _Job, open: bool) -> None:
        self._charge(worker)
        job.paused = not open
        if job.reading is not None:
            job.reading.cancel()
            job.reading = None
        if not open:
            job.reading = asyncio.get_running_loop().call_later(
                self._slow_reader_timeout, self._drop_slow_reader, worker, job
            )
        self._plan_timeouts(worker)
        worker.send(Resume(job.job_id) if open else Pause(job.job_id))

    def _charge(self, worker: _Worker) -> None:
        """Charge `worker`'s running jobs their shares of its time; call before that set
        changes."""
        now = asyncio.get_running_loop().time()
        running = [job for job in worker.jobs.values() if not job.paused]
        for job in running:
            job.left -= (now - worker.accounted) / len(running)
        worker.accounted = now

    def _plan_timeouts(self, worker: _Worker) -> None:
        """Time out each running job when its budget is spent at its share of `worker`: a
        timeout bounds a job's own synthesis, not its wait while others are served."""
        loop = asyncio.get_running_loop()
        running = [job for job in worker.jobs.values() if not job.paused]
        for job in worker.jobs.values():
            if job.synthesis is not None:
                job.synthesis.cancel()
                job.synthesis = None
            if not job.paused:
                delay = max(0.0, job.left) * len(running)
                job.synthesis = loop.call_later(delay, self._time_out, worker, job)

    def _time_out(self, worker: _Worker, job: _Job) -> None:
        if worker.jobs.get(job.job_id) is job and worker.process is not None:
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

    def _watch(self) -> None:
        """Every so often, replace ready workers silent for `stall_timeout`: their heartbeat
        thread is not running, so neither is anything else."""
        if self._closing:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        period = self._stall_timeout / 4
        # A late round means our own loop was held up and heartbeats are unread: skip it.
        on_time = self._watchdog is None or now - self._watchdog.when() < period
        for worker in self._workers:
            live = worker.state in (WorkerState.IDLE, WorkerState.BUSY)
            silent = now - worker.heard > self._stall_timeout
            if on_time and live and worker.process is not None and silent:
                self._stalled(worker)
        self._watchdog = loop.call_later(period, self._watch)

    def _stalled(self, worker: _Worker) -> None:
        assert worker.process is not None
        log.error(
            "%s worker %d (pid %s) sent nothing for %g s: wedged, replacing it",
            self.config.name,
            worker.index,
            worker.process.pid,
            self._stall_timeout,
        )
        for job in worker.jobs.values():
            job.error = job.error or WorkerStalled(self._stall_timeout)
        worker.process.kill()  # its socket closing restarts it and ends its jobs
        worker.heard = asyncio.get_running_loop().time()  # killed once, not every round

    def _drop_slow_reader(self, worker: _Worker, job: _Job) -> None:
        if worker.jobs.get(job.job_id) is not job:
            return
        log.warning(
            "%s worker %d: the reader took nothing for %g s, cancelling its job",
            self.config.name,
            worker.index,
            self._slow_reader_timeout,
        )
        job.inbox.put_nowait(
            SlowReader(
                f"The client read no audio for {self._slow_reader_timeout:g} s.",
            )
        )
        job.abandon()
        self._cancel(worker, job)

    def _cancel(self, worker: _Worker, job: _Job) -> None:
        # The slot is released on the worker's Done(cancelled).
        worker.send(Cancel(job.job_id))
        self._admission.ending(job.slot)

    def _on_death(self, worker: _Worker) -> None:
        was_starting = worker.state is WorkerState.STARTING
        self._detach(worker)
        for slot in worker.slots:
            self._admission.discard(slot)
            self._parked.discard(slot)
        if worker.guest is not None:
            self._admission.discard(worker.guest)
        for job in list(worker.jobs.values()):
            self._end_job(worker, job)
            self._outcomes["lost"] += 1
            job.deliver(job.error or WorkerLost())
        if self._closing:
            worker.state = WorkerState.STOPPED
            return
        if worker.ready is not None and not worker.ready.done():
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
