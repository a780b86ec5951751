"""A benchmark's results: the value, its tables, JSON and plot."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text as RichText

from speechgate.bench.comparison import (
    Reference,
    ServerRun,
    comparison_table,
    ratio_lines,
    ratios,
)
from speechgate.bench.overhead import Overhead
from speechgate.bench.stats import Comparison, Percentiles, RunStats, Sample


@dataclass(frozen=True)
class InProcessResult:
    """The ceiling is measured in slices around each level of the HTTP load, so each level is
    held against the ceiling measured within a minute of it (`ceiling_beside`), not several."""

    single: RunStats
    single_threads: int
    ceiling: RunStats
    ceiling_slices: list[float]
    ceiling_beside: dict[int, float]
    comparison: Comparison
    overhead: Overhead | None = None  # paired measurement, see speechgate.bench.overhead
    # One process with a thread per core, unpinned: what a lone client could get at best.
    all_threads: RunStats | None = None
    all_threads_threads: int = 0


@dataclass(frozen=True)
class BenchReport:
    """Everything one `speechgate bench` run measured. `samples[i]` belongs to `levels[i]`."""

    url: str
    model: str
    voice: str
    format: str
    cpu_source: str
    levels: list[RunStats]
    samples: list[list[Sample]]
    in_process: InProcessResult | None = None
    rss_peak: int | None = None
    rss_end: int | None = None
    baselines: list[ServerRun] = dataclasses.field(default_factory=list)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _pcts(p: Percentiles) -> str:
    return f"{_ms(p.p50)} / {_ms(p.p95)} / {_ms(p.p99)}"


def _errors(errors: dict[str, int]) -> str:
    return ", ".join(f"{key}: {count}" for key, count in errors.items()) or "0"


def server_table(report: BenchReport) -> Table:
    table = Table(
        title=f"{report.url}  model={report.model} voice={report.voice} format={report.format}",
        caption="times in ms · audio s/s = audio seconds per wall second\n"
        f"CPU % (100 = one core): {report.cpu_source}",
    )
    for column in ("conc", "ok", "429", "errors", "audio s/s"):
        table.add_column(column, justify="right", no_wrap=True)
    for column in ("TTFA p50 / p95 / p99", "total p50 / p95 / p99", "CPU %"):
        table.add_column(column, justify="right", no_wrap=True)
    for level in report.levels:
        table.add_row(
            str(level.concurrency),
            str(level.completed),
            str(level.rejected),
            _errors(level.errors),
            f"{level.throughput:.1f}",
            _pcts(level.ttfa_ms),
            _pcts(level.latency_ms),
            "-" if level.cpu_percent is None else f"{level.cpu_percent:.0f}",
        )
    return table


def in_process_table(result: InProcessResult, format: str) -> Table:
    table = Table(title=f"in-process (no server): same texts and voice, {format} at 24 kHz")
    table.add_column("run", no_wrap=True)
    for column in ("ok", "audio s/s", "TTFA p50 / p95 / p99", "total p50 / p95 / p99"):
        table.add_column(column, justify="right", no_wrap=True)
    table.add_column("short TTFA p50", justify="right", no_wrap=True)
    rows = [(f"1 process, {result.single_threads} thread(s)", result.single)]
    if result.all_threads is not None:
        rows.append(
            (f"1 process, {result.all_threads_threads} threads, unpinned", result.all_threads)
        )
    rows.append((f"ceiling: {result.ceiling.concurrency} processes, 1 thread each", result.ceiling))
    for label, stats in rows:
        table.add_row(
            label,
            str(stats.completed),
            f"{stats.throughput:.1f}",
            _pcts(stats.ttfa_ms),
            _pcts(stats.latency_ms),
            _ms(stats.short_ttfa_p50_ms),
        )
    return table


def _overhead_text(overhead: Overhead | None) -> str:
    if overhead is None:
        return ""
    text = (
        f"\ngateway overhead, paired ({overhead.pairs} pairs, short texts): "
        f"median of (server - in-process) TTFA = "
        f"{overhead.paired_difference_p50_ms:+.2f} ms  (p50 server "
        f"{overhead.server_ttfa_p50_ms:.1f} ms, in-process "
        f"{overhead.inprocess_ttfa_p50_ms:.1f} ms)"
    )
    if overhead.per_request_p50_ms is not None and overhead.worker_engine_ttfa_p50_ms is not None:
        text += (
            f"\ngateway overhead, per request (same requests): median of (client TTFA - the "
            f"worker's engine TTFA from Server-Timing) = {overhead.per_request_p50_ms:+.2f} ms"
            f"  (p50 engine in the worker {overhead.worker_engine_ttfa_p50_ms:.1f} ms)"
        )
    return text


def comparison_text(result: InProcessResult) -> RichText:
    c = result.comparison
    efficiency = "-" if c.efficiency is None else f"{c.efficiency:.2f}"
    overhead = "-" if c.gateway_overhead_ms is None else f"{c.gateway_overhead_ms:+.0f} ms"
    return RichText(
        f"server at saturation (conc {c.saturation_concurrency}): "
        f"{c.saturation_throughput:.1f} audio s/s / ceiling {c.ceiling_throughput:.1f} = "
        f"{efficiency}  (the ceiling beside it; its slices, before the first level and after "
        f"each: {', '.join(f'{value:.1f}' for value in result.ceiling_slices)})\n"
        f"gateway overhead, short texts, p50 TTFA at conc {c.overhead_concurrency}: server "
        f"{_ms(c.server_short_ttfa_p50_ms)} ms - in-process {_ms(c.inprocess_short_ttfa_p50_ms)}"
        f" ms = {overhead}" + _overhead_text(result.overhead)
    )


def side_by_side(report: BenchReport) -> RenderableType:
    """speechgate, the baselines and the in-process references in one table, with the ratios
    the targets are stated in."""
    speechgate = ServerRun("speechgate", report.levels, report.rss_peak, report.rss_end)
    references: list[Reference] = []
    result = report.in_process
    if result is not None:
        if result.all_threads is not None:
            name = f"in-process, 1 x {result.all_threads_threads} threads"
            references.append(Reference(name, result.all_threads))
        name = f"in-process ceiling, {result.ceiling.concurrency} x 1 thread pinned"
        references.append(Reference(name, result.ceiling))
    levels = [level.concurrency for level in report.levels]
    table = comparison_table([speechgate, *report.baselines], references, levels)
    found = ratios(
        speechgate,
        report.baselines,
        result.all_threads if result else None,
        result.ceiling_beside if result else None,
    )
    return Group(table, RichText("\n".join(ratio_lines(found))))


def render_report(report: BenchReport) -> RenderableType:
    parts: list[RenderableType] = [server_table(report)]
    if report.in_process is not None:
        parts += [
            in_process_table(report.in_process, report.format),
            comparison_text(report.in_process),
        ]
    if report.in_process is not None or report.baselines:
        parts.append(side_by_side(report))
    return Group(*parts)


def to_json(report: BenchReport) -> dict[str, Any]:
    data: dict[str, Any] = dataclasses.asdict(report)
    return data


def write_json(report: BenchReport, path: Path) -> None:
    path.write_text(json.dumps(to_json(report), indent=2) + "\n", encoding="utf-8")


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value  # matplotlib leaves a gap


def write_plot(report: BenchReport, path: Path) -> None:
    """Throughput and p50/p95 TTFA against concurrency; in-process figures as lines across."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render straight to the file
    import matplotlib.pyplot as plt

    levels: Sequence[RunStats] = report.levels
    x = [level.concurrency for level in levels]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    left.plot(x, [level.throughput for level in levels], "o-", label="server")
    right.plot(x, [_nan(level.ttfa_ms.p50) for level in levels], "o-", label="p50")
    right.plot(x, [_nan(level.ttfa_ms.p95) for level in levels], "s--", label="p95")
    if report.in_process is not None:
        ceiling, single = report.in_process.ceiling, report.in_process.single
        left.axhline(ceiling.throughput, color="C3", label=f"ceiling ({ceiling.concurrency} procs)")
        left.axhline(single.throughput, color="C2", linestyle=":", label="1 process")
        if single.ttfa_ms.p50 is not None:
            right.axhline(single.ttfa_ms.p50, color="C2", linestyle=":", label="in-process p50")
    for axis in (left, right):
        axis.set_xscale("log", base=2)
        axis.set_xticks(x, [str(c) for c in x])
        axis.set_xlabel("concurrent requests")
        axis.grid(alpha=0.3)
        axis.legend()
        axis.margins(y=0.1)  # keeps a line at the top of the data off the frame
    left.set_ylabel("audio seconds per wall second")
    left.set_ylim(bottom=0)
    right.set_ylabel("time to first audio (ms)")
    right.set_ylim(bottom=0)
    figure.suptitle(f"speechgate bench: {report.model}, {report.format}")
    figure.savefig(path, dpi=120)
    plt.close(figure)
