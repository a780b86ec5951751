"""Per-request samples and the statistics over them; pure functions, no I/O."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from speechgate.bench.texts import TextKind


@dataclass(frozen=True)
class Sample:
    """One request, from the client's side (or one in-process `render` call): seconds from
    sending; `status` 0 when it failed before one arrived (`error` names the exception)."""

    kind: TextKind
    status: int
    latency: float
    ttfa: float | None = None
    audio_seconds: float = 0.0
    error: str | None = None
    server_ttfa: float | None = None  # the server's own x-speechgate-time-to-first-audio-ms

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None


@dataclass(frozen=True)
class Percentiles:
    """Milliseconds; None when there were no values."""

    p50: float | None
    p95: float | None
    p99: float | None


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else None


def percentiles_ms(seconds: Sequence[float]) -> Percentiles:
    ms = [s * 1000.0 for s in seconds]
    return Percentiles(percentile(ms, 50), percentile(ms, 95), percentile(ms, 99))


@dataclass(frozen=True)
class RunStats:
    """One load level against the server, or one in-process run. `throughput` is audio
    seconds of successful requests per wall second; `cpu_percent` 100 is one core busy."""

    concurrency: int
    requests: int
    completed: int
    rejected: int  # 429s
    errors: dict[str, int]  # other failures, by status or exception name
    wall_seconds: float
    audio_seconds: float
    throughput: float
    ttfa_ms: Percentiles
    latency_ms: Percentiles
    short_ttfa_p50_ms: float | None
    cpu_percent: float | None = None


def summarize(
    concurrency: int, samples: Sequence[Sample], wall_seconds: float, cpu_percent: float | None
) -> RunStats:
    """Aggregate samples; latency and TTFA percentiles count successful requests only."""
    ok = [s for s in samples if s.ok]
    errors = Counter(s.error or str(s.status) for s in samples if not s.ok and s.status != 429)
    audio = sum(s.audio_seconds for s in ok)
    short_ttfa = [s.ttfa * 1000.0 for s in ok if s.kind == "short" and s.ttfa is not None]
    return RunStats(
        concurrency=concurrency,
        requests=len(samples),
        completed=len(ok),
        rejected=sum(1 for s in samples if s.status == 429),
        errors=dict(sorted(errors.items())),
        wall_seconds=wall_seconds,
        audio_seconds=audio,
        throughput=audio / wall_seconds if wall_seconds > 0 else 0.0,
        ttfa_ms=percentiles_ms([s.ttfa for s in ok if s.ttfa is not None]),
        latency_ms=percentiles_ms([s.latency for s in ok]),
        short_ttfa_p50_ms=percentile(short_ttfa, 50),
        cpu_percent=cpu_percent,
    )


@dataclass(frozen=True)
class Comparison:
    """The server against the in-process numbers of the same run. `efficiency`: best server
    throughput / the ceiling measured beside that level (the machine drifts over a run)."""

    saturation_concurrency: int
    saturation_throughput: float
    ceiling_throughput: float
    efficiency: float | None
    overhead_concurrency: int
    server_short_ttfa_p50_ms: float | None
    inprocess_short_ttfa_p50_ms: float | None
    gateway_overhead_ms: float | None


def compare(
    levels: Sequence[RunStats], single: RunStats, ceilings: Mapping[int, float]
) -> Comparison:
    best = max(levels, key=lambda level: level.throughput)
    lowest = min(levels, key=lambda level: level.concurrency)
    server, local = lowest.short_ttfa_p50_ms, single.short_ttfa_p50_ms
    ceiling = ceilings[best.concurrency]
    return Comparison(
        saturation_concurrency=best.concurrency,
        saturation_throughput=best.throughput,
        ceiling_throughput=ceiling,
        efficiency=best.throughput / ceiling if ceiling > 0 else None,
        overhead_concurrency=lowest.concurrency,
        server_short_ttfa_p50_ms=server,
        inprocess_short_ttfa_p50_ms=local,
        gateway_overhead_ms=server - local if server is not None and local is not None else None,
    )
