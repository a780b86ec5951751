"""`speechgate bench`: the HTTP load with a progress bar, the baseline servers, and the
in-process runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import psutil
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from speechgate.bench import child
from speechgate.bench.baselines import Baseline
from speechgate.bench.comparison import ServerRun
from speechgate.bench.cpu import CpuMeter
from speechgate.bench.inprocess import (
    EngineJob,
    InProcessRun,
    measure_all_threads,
    measure_ceiling,
    measure_single,
)
from speechgate.bench.load import LevelRun, LoadConfig, Send, run_load, send
from speechgate.bench.overhead import Overhead, measure_overhead
from speechgate.bench.report import BenchReport, InProcessResult
from speechgate.bench.stats import RunStats, Sample, compare, summarize
from speechgate.catalog import engine_for_model
from speechgate.engines.base import EngineConfig
from speechgate.pipeline import OutputSpec
from speechgate.runtime import engine_config
from speechgate.settings import Settings


@dataclass(frozen=True)
class InProcessConfig:
    """In-process runs use the engine `settings` describes: run the bench with the server's
    environment so both load the same model."""

    settings: Settings
    seconds: float = 10.0
    processes: int | None = None  # ceiling processes; default one per usable core
    # The voice as the engine names it, where the client's name is not (a clone's sample).
    voice: str | None = None


def _load_with_progress(config: LoadConfig, console: Console, send: Send = send) -> list[LevelRun]:
    columns = (
        TextColumn("[bold]conc {task.fields[level]:>3}"),
        BarColumn(),
        MofNCompleteColumn() if config.requests_per_level else TimeElapsedColumn(),
        TextColumn("{task.fields[done]} done · {task.fields[rejected]} rejected (429)"),
    )
    # Twice a second, not rich's ten: every redraw is CPU taken from the server under test.
    with Progress(*columns, console=console, transient=False, refresh_per_second=2) as progress:
        total = config.requests_per_level or config.duration
        tasks = {
            level: progress.add_task("", total=total, level=level, done=0, rejected=0)
            for level in config.levels
        }
        counts = {level: [0, 0] for level in config.levels}

        def on_sample(level: int, sample: Sample, elapsed: float) -> None:
            counts[level][0 if sample.status != 429 else 1] += 1
            done, rejected = counts[level]
            advance = (
                {"completed": done + rejected}
                if config.requests_per_level
                else {"completed": min(elapsed, config.duration or elapsed)}
            )
            progress.update(tasks[level], done=done, rejected=rejected, **advance)

        runs = asyncio.run(run_load(config, on_sample, send))
        for level in config.levels:  # a duration level ends when its last request does
            progress.update(tasks[level], completed=total)
    return runs


def _server_cores(config: LoadConfig) -> list[int] | None:
    return psutil.Process(config.server_pid).cpu_affinity() if config.server_pid else None


@dataclass(eq=False)
class _Other:
    baseline: Baseline
    load: LoadConfig
    runs: list[LevelRun] = field(default_factory=list)


def _start_baselines(
    stack: contextlib.ExitStack,
    config: LoadConfig,
    baselines: Sequence[Baseline],
    console: Console,
    log_dir: Path | None = None,
) -> list[_Other]:
    """Start each baseline on the speechgate server's cores, stopped when `stack` closes."""
    logs = log_dir or Path(tempfile.mkdtemp(prefix="speechgate-bench-"))
    cores = _server_cores(config)
    started: list[_Other] = []
    for baseline in baselines:
        log = logs / f"{baseline.name.split()[0]}-{baseline.port}.log"
        console.print(f"{baseline.name}: starting on port {baseline.port} (log: {log}) …")
        env = child.clean_env(**baseline.env)
        ready = baseline.url + baseline.ready_path
        pid = stack.enter_context(child.child_server(baseline.command, env, ready, log, cpus=cores))
        load = replace(config, url=baseline.url, server_pid=pid, api_key=None)
        started.append(_Other(baseline, load))
    return started


def _server_run(name: str, runs: Sequence[LevelRun]) -> ServerRun:
    peaks = [run.rss_peak for run in runs if run.rss_peak is not None]
    return ServerRun(
        name,
        [run.stats for run in runs],
        max(peaks) if peaks else None,
        runs[-1].rss_end if runs else None,
        [run.samples for run in runs],
    )


def run_bench(
    config: LoadConfig,
    in_process: InProcessConfig | None,
    console: Console,
    baselines: Sequence[Baseline] = (),
    log_dir: Path | None = None,
) -> BenchReport:
    """The HTTP load, level by level, on speechgate and each baseline back to back. Machines
    drift over minutes, so with `in_process` each level is held against slices of the ceiling
    measured on either side of it (the first level also against one process with every core)."""
    prelude = _in_process_prelude(config, in_process, console) if in_process else None
    runs: list[LevelRun] = []
    slices: list[InProcessRun] = []
    wide: list[InProcessRun] = []
    with contextlib.ExitStack() as stack:
        others = _start_baselines(stack, config, baselines, console, log_dir)
        if prelude is not None:
            wide.append(prelude.all_threads("before the first level"))
            slices.append(prelude.ceiling("before the first level"))
        for index, level in enumerate(config.levels):
            # Each level warms each server up again: the others have just had the cores.
            runs += _load_with_progress(replace(config, levels=(level,)), console)
            for other in others:
                load = replace(other.load, levels=(level,))
                other.runs += _load_with_progress(load, console, other.baseline.send)
            if prelude is not None:
                slices.append(prelude.ceiling(f"after c = {level}"))
                if index == 0:
                    wide.append(prelude.all_threads(f"after c = {level}"))
    compared = [_server_run(other.baseline.name, other.runs) for other in others]
    result = prelude.result(runs, slices, wide) if prelude is not None else None
    return _report(config, runs, result, compared)


def _pooled(slices: Sequence[InProcessRun]) -> RunStats:
    return summarize(
        slices[0].stats.concurrency,
        [sample for part in slices for sample in part.samples],
        sum(part.stats.wall_seconds for part in slices),
        None,
    )


@dataclass(frozen=True)
class _Prelude:
    """What the in-process runs measured before the levels, and the slices between them."""

    config: LoadConfig
    in_process: InProcessConfig
    engine: EngineConfig
    voice: str
    output: OutputSpec
    cores: list[int] | None
    console: Console
    single: InProcessRun
    overhead: Overhead

    def all_threads(self, when: str) -> InProcessRun:
        return self._slice(f"1 process, all threads ({when})", measure_all_threads)

    def ceiling(self, when: str) -> InProcessRun:
        processes = self.in_process.processes
        return self._slice(f"ceiling ({when})", partial(measure_ceiling, processes=processes))

    def _slice(self, name: str, measure: Callable[..., InProcessRun]) -> InProcessRun:
        seconds = self.in_process.seconds / 2
        with self.console.status(f"in-process: {name}, {seconds:.0f} s"):
            return measure(
                self.engine,
                self.voice,
                self.in_process.settings.voice_aliases,
                seconds,
                texts=self.config.texts,
                output=self.output,
                cores=self.cores,
            )

    def result(
        self, runs: Sequence[LevelRun], slices: Sequence[InProcessRun], wide: Sequence[InProcessRun]
    ) -> InProcessResult:
        """The in-process results, given the levels' `runs` and the slices around them."""
        throughputs = [part.stats.throughput for part in slices]
        beside = {
            level: (throughputs[i] + throughputs[i + 1]) / 2
            for i, level in enumerate(self.config.levels)
        }
        return InProcessResult(
            single=self.single.stats,
            single_threads=self.single.threads,
            ceiling=_pooled(slices),
            ceiling_slices=throughputs,
            ceiling_beside=beside,
            comparison=compare([run.stats for run in runs], self.single.stats, beside),
            overhead=self.overhead,
            all_threads=_pooled(wide),
            all_threads_threads=wide[0].threads,
        )


def _in_process_prelude(
    config: LoadConfig, in_process: InProcessConfig, console: Console
) -> _Prelude:
    settings = in_process.settings
    engine = engine_config(settings, engine_for_model(settings, config.model))
    voice = in_process.voice or config.voice
    aliases, seconds = settings.voice_aliases, in_process.seconds
    output = OutputSpec(config.format, 24000)
    # On the server's own cores, if we know them: the ceiling is of the same hardware.
    cores = _server_cores(config)
    with console.status(f"in-process: 1 process, {seconds:.0f} s"):
        single = measure_single(engine, voice, aliases, seconds, config.texts, output, cores)
    # No spinner here: its refresh thread would take the GIL from the timing client.
    console.print("in-process: gateway overhead, paired and per request …")
    first_worker = tuple(sorted(cores or os.sched_getaffinity(0))[: engine.threads])
    overhead = measure_overhead(
        config.url,
        config.model,
        EngineJob(engine, voice, aliases, 0.0, first_worker, tuple(config.texts), output),
        server_voice=config.voice,
    )
    return _Prelude(config, in_process, engine, voice, output, cores, console, single, overhead)


def _report(
    config: LoadConfig,
    runs: list[LevelRun],
    in_process: InProcessResult | None,
    baselines: list[ServerRun],
) -> BenchReport:
    server = _server_run("speechgate", runs)
    return BenchReport(
        url=config.url,
        model=config.model,
        voice=config.voice,
        format=config.format.value,
        cpu_source=CpuMeter(config.server_pid).source,
        levels=[run.stats for run in runs],
        samples=[run.samples for run in runs],
        in_process=in_process,
        rss_peak=server.rss_peak,
        rss_end=server.rss_end,
        baselines=baselines,
    )
