"""The engine timed without a server: one process like one worker, one process with every
core, and the ceiling.

The ceiling is one pinned single-thread engine process per core, back to back: the gap to it
is what the gateway, queueing and IPC cost.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.queues import Queue

from speechgate.audio.formats import AudioFormat
from speechgate.bench.audio import audio_offset
from speechgate.bench.stats import RunStats, Sample, summarize
from speechgate.bench.texts import TEXTS, Text, TextKind
from speechgate.engines.base import Engine, EngineConfig, SynthesisRequest
from speechgate.pipeline import OutputSpec, render
from speechgate.workers.affinity import confine
from speechgate.workers.forking import CONTEXT, preload_engines
from speechgate.workers.process import limit_threads

OUTPUT = OutputSpec(AudioFormat.WAV, 24000)
_FAILURE_WAIT = 10.0


@dataclass(frozen=True)
class EngineJob:
    """What one benchmark process runs; picklable for `spawn`."""

    engine: EngineConfig
    # A client name ("alloy"), or an absolute path to a voice file (a clone's state).
    voice: str
    voice_aliases: Mapping[str, Mapping[str, str]]
    seconds: float
    cpus: tuple[int, ...] = ()
    texts: tuple[Text, ...] = TEXTS
    output: OutputSpec = OUTPUT


@dataclass(frozen=True)
class _Result:
    started: float
    ended: float
    samples: list[Sample]


@dataclass(frozen=True)
class _Failure:
    message: str


@dataclass(frozen=True)
class InProcessRun:
    stats: RunStats
    samples: list[Sample] = field(repr=False)
    threads: int = 1


def _speak_all(job: EngineJob, ready: threading.Barrier, results: Queue[object]) -> None:
    try:
        results.put(_run_job(job, ready))
    except Exception as error:
        results.put(_Failure(f"{type(error).__name__}: {error}"))
        ready.abort()  # the parent and the other processes stop waiting


def load_pinned(job: EngineJob) -> tuple[Engine, str]:
    """Pin the process, load the engine as a worker would and warm it up."""
    if job.cpus:
        confine(os.getpid(), job.cpus)
    limit_threads(job.engine.threads)
    from speechgate.catalog import Catalog
    from speechgate.engines import SynthesisRequest, load_engine
    from speechgate.engines.base import EngineInfo

    engine = load_engine(job.engine)
    catalog = Catalog({engine.name: EngineInfo.of(engine)}, {}, job.voice_aliases)
    voice = job.voice if os.path.isabs(job.voice) else catalog.voice(engine.name, job.voice)
    for _ in render(engine, SynthesisRequest(job.texts[0].text, voice), job.output):
        pass
    return engine, voice


def speak(
    engine: Engine, request: SynthesisRequest, output: OutputSpec, kind: TextKind = "short"
) -> Sample:
    """One request in-process, timed as the HTTP client times one."""
    offset = audio_offset(output.format)
    sent = time.monotonic()
    ttfa: float | None = None
    seconds, received = 0.0, 0
    for chunk in render(engine, request, output):
        received += len(chunk.data)
        # As the HTTP client times it: first encoded bytes past any header.
        if ttfa is None and received > offset:
            ttfa = time.monotonic() - sent
        seconds += chunk.audio_seconds
    return Sample(kind, 200, time.monotonic() - sent, ttfa, seconds)


def _run_job(job: EngineJob, ready: threading.Barrier) -> _Result:
    engine, voice = load_pinned(job)
    try:
        requests = [(text.kind, SynthesisRequest(text.text, voice)) for text in job.texts]
        ready.wait()
        samples: list[Sample] = []
        started = time.monotonic()
        deadline = started + job.seconds
        for kind, request in itertools.cycle(requests):
            if time.monotonic() >= deadline:
                break
            samples.append(speak(engine, request, job.output, kind))
        return _Result(started, time.monotonic(), samples)
    finally:
        engine.close()


def run_processes(jobs: Sequence[EngineJob], start_timeout: float = 300.0) -> InProcessRun:
    """Run `jobs` in parallel processes, started together once all have loaded their engine.
    Raises `RuntimeError` if one fails to load."""
    # Started as workers are: not forked from this process, whose threads' locks a child inherits.
    preload_engines(job.engine.name for job in jobs)
    results = CONTEXT.Queue()
    ready = CONTEXT.Barrier(len(jobs) + 1)
    processes = [
        CONTEXT.Process(target=_speak_all, args=(job, ready, results), daemon=True) for job in jobs
    ]
    for process in processes:
        process.start()
    try:
        try:
            ready.wait(timeout=start_timeout)
        except threading.BrokenBarrierError:
            failures = _failures(results)
            raise RuntimeError(f"an engine process failed: {'; '.join(failures)}") from None
        collected = [results.get(timeout=start_timeout + job.seconds) for job in jobs]
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    done = [r for r in collected if isinstance(r, _Result)]
    if len(done) != len(jobs):
        failures = [r.message for r in collected if isinstance(r, _Failure)]
        raise RuntimeError(f"an engine process failed: {'; '.join(failures)}")
    samples = [sample for result in done for sample in result.samples]
    wall = max(r.ended for r in done) - min(r.started for r in done)
    return InProcessRun(summarize(len(jobs), samples, wall, None), samples, jobs[0].engine.threads)


def _failures(results: Queue[object]) -> list[str]:
    """What the processes that broke the start barrier reported (each sends before breaking)."""
    failures: list[str] = []
    with contextlib.suppress(queue.Empty):
        item = results.get(timeout=_FAILURE_WAIT)
        while True:
            if isinstance(item, _Failure):
                failures.append(item.message)
            item = results.get_nowait()
    return failures


def measure_single(
    engine: EngineConfig,
    voice: str,
    voice_aliases: Mapping[str, Mapping[str, str]],
    seconds: float,
    texts: Sequence[Text] = TEXTS,
    output: OutputSpec = OUTPUT,
    cores: Sequence[int] | None = None,
) -> InProcessRun:
    """One process, one request at a time: what one server worker does."""
    cpus = tuple(sorted(cores or os.sched_getaffinity(0))[: engine.threads])
    return run_processes(
        [EngineJob(engine, voice, voice_aliases, seconds, cpus, tuple(texts), output)]
    )


def measure_ceiling(
    engine: EngineConfig,
    voice: str,
    voice_aliases: Mapping[str, Mapping[str, str]],
    seconds: float,
    processes: int | None = None,
    texts: Sequence[Text] = TEXTS,
    output: OutputSpec = OUTPUT,
    cores: Sequence[int] | None = None,
) -> InProcessRun:
    """`processes` single-thread engines, each pinned to its own core (default: one per core)."""
    usable = sorted(cores or os.sched_getaffinity(0))
    count = processes or len(usable)
    if count > len(usable):
        raise ValueError(f"{count} processes but only {len(usable)} cores: {usable}")
    single = replace(engine, threads=1)
    return run_processes(
        [
            EngineJob(single, voice, voice_aliases, seconds, (core,), tuple(texts), output)
            for core in usable[:count]
        ]
    )


def measure_all_threads(
    engine: EngineConfig,
    voice: str,
    voice_aliases: Mapping[str, Mapping[str, str]],
    seconds: float,
    texts: Sequence[Text] = TEXTS,
    output: OutputSpec = OUTPUT,
    cores: Sequence[int] | None = None,
) -> InProcessRun:
    """One process with a thread per core: the best a lone client could have."""
    usable = tuple(sorted(cores or os.sched_getaffinity(0)))
    wide = replace(engine, threads=len(usable))
    # Restricted to `cores` only when given: within them, the scheduler places the threads.
    cpus = usable if cores else ()
    return run_processes(
        [EngineJob(wide, voice, voice_aliases, seconds, cpus, tuple(texts), output)]
    )
