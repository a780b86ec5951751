"""The code that runs inside a worker process: load the engine once, then run jobs one by one."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Sequence

from speechgate.engines.base import Elastic, Engine, EngineConfig, EngineInfo, VoiceCloner
from speechgate.pipeline import render
from speechgate.workers import wire
from speechgate.workers.affinity import confine
from speechgate.workers.messages import (
    Chunk,
    Cloned,
    CloneJob,
    Done,
    Failed,
    Job,
    Ready,
    Shutdown,
    StartupFailed,
    Width,
)

# Libraries read these when they are first imported, so they are set before the engine loads.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(threads: int) -> None:
    """Cap the engine's compute threads; call before the engine (and its libraries) load."""
    for variable in _THREAD_VARIABLES:
        os.environ[variable] = str(threads)


def worker_main(config: EngineConfig, conn: socket.socket, cpus: Sequence[int]) -> None:
    """Entry point of a worker process (started with `spawn`)."""
    # Ctrl-C reaches the whole process group; the gateway decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cpus:
        # Every thread: some exist before this runs (the interpreter's, imports').
        confine(os.getpid(), cpus)
    limit_threads(config.threads)

    from speechgate.engines import load_engine

    try:
        engine = load_engine(config)
    except Exception as error:
        wire.send(conn, StartupFailed(f"{type(error).__name__}: {error}"))
        return
    wire.send(conn, Ready(EngineInfo.of(engine)))
    try:
        while True:
            message = wire.receive(conn)
            if isinstance(message, Shutdown):
                return
            # A Cancel or Width for a job that already ended needs nothing.
            if isinstance(message, Job) and not _run(engine, message, conn):
                return
            if isinstance(message, CloneJob):
                _clone(engine, message, conn)
    except (EOFError, OSError):
        return  # the gateway is gone
    finally:
        with contextlib.suppress(Exception):
            engine.close()


def _run(engine: Engine, job: Job, conn: socket.socket) -> bool:
    """Run one job to its terminal message. Returns False when the worker must stop."""
    _use_threads(engine, job.threads)
    chunks = render(engine, job.request, job.output)
    try:
        for audio in chunks:
            # While a job runs the gateway sends only Width, Cancel or Shutdown: check between
            # chunks, so an abandoned job stops at the next chunk boundary.
            while wire.pending(conn):
                message = wire.receive(conn)
                if isinstance(message, Width):
                    if message.job_id == job.job_id:
                        _use_threads(engine, message.threads)
                    continue
                wire.send(conn, Done(job.job_id, cancelled=True))
                return not isinstance(message, Shutdown)
            wire.send(conn, Chunk(job.job_id, audio))
    except Exception as error:
        wire.send(conn, Failed(job.job_id, f"{type(error).__name__}: {error}"))
        return True
    finally:
        chunks.close()
    wire.send(conn, Done(job.job_id))
    return True


def _use_threads(engine: Engine, threads: int) -> None:
    if isinstance(engine, Elastic):
        engine.use_threads(threads)


def _clone(engine: Engine, job: CloneJob, conn: socket.socket) -> None:
    """Compute a voice state: one step, so a Cancel sent meanwhile finds the job ended."""
    _use_threads(engine, job.threads)
    try:
        if not isinstance(engine, VoiceCloner):
            raise ValueError(f"engine {engine.name!r} cannot clone voices")
        state = engine.clone(job.prompt)
    except Exception as error:
        wire.send(conn, Failed(job.job_id, f"{type(error).__name__}: {error}"))
        return
    wire.send(conn, Cloned(job.job_id, state))
    wire.send(conn, Done(job.job_id))
