"""Statistics over synthetic samples: no server, no clock."""

from __future__ import annotations

import pytest

from speechgate.bench.stats import (
    Percentiles,
    RunStats,
    Sample,
    compare,
    percentile,
    percentiles_ms,
    summarize,
)


def test_percentile_interpolates_linearly() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 95) == pytest.approx(4.8)
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 5.0
    assert percentile([], 50) is None


def test_percentiles_ms_converts_seconds() -> None:
    assert percentiles_ms([0.1] * 10) == Percentiles(
        pytest.approx(100.0), pytest.approx(100.0), pytest.approx(100.0)
    )
    assert percentiles_ms([]) == Percentiles(None, None, None)


def test_summarize_counts_and_rates() -> None:
    samples = [
        Sample("short", 200, latency=0.5, ttfa=0.1, audio_seconds=2.0),
        Sample("medium", 200, latency=1.5, ttfa=0.3, audio_seconds=8.0),
        Sample("short", 429, latency=0.01),
        Sample("short", 429, latency=0.01),
        Sample("medium", 500, latency=0.2),
        Sample("short", 0, latency=0.7, ttfa=0.1, audio_seconds=0.5, error="RemoteProtocolError"),
    ]
    stats = summarize(4, samples, wall_seconds=5.0, cpu_percent=150.0)
    assert stats.concurrency == 4
    assert stats.requests == 6
    assert stats.completed == 2
    assert stats.rejected == 2
    assert stats.errors == {"500": 1, "RemoteProtocolError": 1}
    assert stats.completed + stats.rejected + sum(stats.errors.values()) == stats.requests
    # Only successful requests count towards audio and the percentiles.
    assert stats.audio_seconds == 10.0
    assert stats.throughput == 2.0
    assert stats.ttfa_ms.p50 == pytest.approx(200.0)
    assert stats.latency_ms.p50 == pytest.approx(1000.0)
    assert stats.short_ttfa_p50_ms == pytest.approx(100.0)
    assert stats.cpu_percent == 150.0


def test_summarize_of_nothing() -> None:
    stats = summarize(1, [], wall_seconds=0.0, cpu_percent=None)
    assert (stats.requests, stats.completed, stats.throughput) == (0, 0, 0.0)
    assert stats.ttfa_ms == Percentiles(None, None, None)
    assert stats.short_ttfa_p50_ms is None


def level(concurrency: int, throughput: float, short_ttfa: float | None) -> RunStats:
    return RunStats(
        concurrency=concurrency,
        requests=10,
        completed=10,
        rejected=0,
        errors={},
        wall_seconds=1.0,
        audio_seconds=throughput,
        throughput=throughput,
        ttfa_ms=Percentiles(None, None, None),
        latency_ms=Percentiles(None, None, None),
        short_ttfa_p50_ms=short_ttfa,
    )


def test_compare_uses_best_level_and_lowest_for_overhead() -> None:
    levels = [
        level(1, 9.0, 150.0),
        level(2, 16.0, 170.0),
        level(4, 17.0, 300.0),
        level(8, 16.5, 600.0),
    ]
    single = level(1, 10.0, 120.0)
    # Each level against the ceiling measured beside it: the best (c = 4) against its own.
    result = compare(levels, single, {1: 30.0, 2: 25.0, 4: 20.0, 8: 10.0})
    assert result.saturation_concurrency == 4
    assert result.ceiling_throughput == 20.0
    assert result.efficiency == pytest.approx(0.85)
    assert result.overhead_concurrency == 1
    assert result.gateway_overhead_ms == pytest.approx(30.0)


def test_compare_without_data() -> None:
    result = compare([level(1, 5.0, None)], level(1, 0.0, 100.0), {1: 0.0})
    assert result.efficiency is None
    assert result.gateway_overhead_ms is None
