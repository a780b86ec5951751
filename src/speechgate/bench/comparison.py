"""The side-by-side table: speechgate, the baseline servers and the in-process references at
each concurrency, and the ratios the targets are stated in. Pure: values in, text out."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.table import Table

from speechgate.bench.stats import RunStats, Sample


@dataclass(frozen=True)
class ServerRun:
    """One server under the load: its levels and its process tree's resident memory."""

    name: str
    levels: list[RunStats]
    rss_peak: int | None = None
    rss_end: int | None = None
    samples: list[list[Sample]] | None = None

    def at(self, concurrency: int) -> RunStats | None:
        return next((s for s in self.levels if s.concurrency == concurrency), None)


@dataclass(frozen=True)
class Reference:
    """An in-process run: no concurrency, one figure for every column."""

    name: str
    stats: RunStats


_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}


@dataclass(frozen=True)
class Ratio:
    """`numerator / denominator` against the goal `value <op> bound`."""

    label: str
    numerator: float
    denominator: float
    op: str
    bound: float

    @property
    def value(self) -> float:
        return self.numerator / self.denominator

    @property
    def met(self) -> bool:
        return _OPS[self.op](self.value, self.bound)


def ratios(
    speechgate: ServerRun,
    baselines: Sequence[ServerRun],
    all_threads: RunStats | None,
    ceilings: Mapping[int, float] | None,
) -> list[Ratio]:
    """The targets, for each figure this run has. First byte is held against the in-process
    per-sentence latency, as speechgate's first audio is its first sentence's."""
    found: list[Ratio] = []

    def add(
        label: str, numerator: float | None, denominator: float | None, op: str, bound: float
    ) -> None:
        if numerator is not None and denominator:
            found.append(Ratio(label, numerator, denominator, op, bound))

    one = speechgate.at(1)
    if one is not None and all_threads is not None:
        add(
            "c=1 first byte p50 / in-process all-threads per-sentence p50",
            one.ttfa_ms.p50,
            all_threads.ttfa_ms.p50,
            "<=",
            1.1,
        )
        add(
            "c=1 throughput / in-process all-threads throughput",
            one.throughput,
            all_threads.throughput,
            ">=",
            0.9,
        )
    if ceilings is not None:
        for c in (4, 8):
            level = speechgate.at(c)
            if level is not None and c in ceilings:
                add(
                    f"c={c} throughput / pinned ceiling",
                    level.throughput,
                    ceilings[c],
                    ">=",
                    0.97,
                )
    for baseline in baselines:
        for level in speechgate.levels:
            other = baseline.at(level.concurrency)
            if other is None:
                continue
            c = level.concurrency
            add(
                f"c={c} throughput, speechgate / {baseline.name}",
                level.throughput,
                other.throughput,
                ">",
                1.0,
            )
            add(
                f"c={c} first byte p50, speechgate / {baseline.name}",
                level.ttfa_ms.p50,
                other.ttfa_ms.p50,
                "<",
                1.0,
            )
    return found


def _gb(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e9:.2f}"


def _memory(server: ServerRun) -> str:
    if server.rss_peak is None:
        return "-"
    return f"{_gb(server.rss_peak)} / {_gb(server.rss_end)}"


def _cell(stats: RunStats | None) -> str:
    if stats is None:
        return "-"
    first = "-" if stats.ttfa_ms.p50 is None else f"{stats.ttfa_ms.p50:.0f} ms"
    return f"{stats.throughput:.1f}x, {first}"


def comparison_table(
    servers: Sequence[ServerRun], references: Sequence[Reference], levels: Sequence[int]
) -> Table:
    """Rows: each server, then each in-process reference; columns: audio s/s and first-byte
    p50 at each level, then the server's resident memory."""
    table = Table(
        title="side by side: same texts, voice and format; closed loop, one kept-alive "
        "connection per client",
        caption="c = clients · cell: audio s/s (x real time), first-byte p50 (the first audio "
        "byte, past the WAV header)\nin-process: throughput and per-sentence p50 (to the first "
        "sentence's audio), the same at every c\nmemory: resident, process and children, GB, "
        "peak over samples every 0.5 s / at the end",
    )
    table.add_column("setup", no_wrap=True)
    for level in levels:
        table.add_column(f"c = {level}", justify="right", no_wrap=True)
    table.add_column("memory", justify="right", no_wrap=True)
    for server in servers:
        cells = [_cell(server.at(level)) for level in levels]
        table.add_row(server.name, *cells, _memory(server))
    for reference in references:
        table.add_row(reference.name, *([_cell(reference.stats)] * len(levels)), "-")
    return table


def ratio_lines(found: Sequence[Ratio]) -> list[str]:
    return [
        f"{r.label} = {r.numerator:.4g} / {r.denominator:.4g} = {r.value:.2f} "
        f"(goal {r.op} {r.bound:g}: {'met' if r.met else 'NOT met'})"
        for r in found
    ]
