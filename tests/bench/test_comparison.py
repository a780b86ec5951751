"""The side-by-side table and the target ratios, from synthetic numbers."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from rich.console import Console

from speechgate.bench.comparison import (
    Reference,
    ServerRun,
    comparison_table,
    ratio_lines,
    ratios,
)
from speechgate.bench.report import BenchReport, render_report, write_json
from speechgate.bench.stats import RunStats, Sample, summarize
from tests.helpers.bench import make_report


def stats(concurrency: int, throughput: float, first_byte_ms: float) -> RunStats:
    """One level whose audio s/s and first-byte p50 are exactly these."""
    sample = Sample("short", 200, 2 * first_byte_ms / 1000, first_byte_ms / 1000, throughput)
    return summarize(concurrency, [sample], 1.0, None)


SPEECHGATE = ServerRun(
    "speechgate",
    [stats(1, 13.7, 347), stats(2, 22.7, 400), stats(4, 27.0, 900), stats(8, 26.2, 1800)],
    rss_peak=970_000_000,
    rss_end=950_000_000,
)
PIPER_HTTP = ServerRun(
    "piper.http_server",
    [stats(1, 21.5, 217), stats(2, 19.6, 500), stats(4, 21.5, 1000)],  # no c = 8
    rss_peak=1_700_000_000,
    rss_end=1_600_000_000,
)
ALL_THREADS = stats(1, 23.8, 196)
CEILING = stats(2, 26.0, 300)
# The ceiling measured beside each level: the machine drifted between c = 4 and c = 8.
CEILINGS = {4: 26.0, 8: 28.0}


def text_of(renderable: object) -> str:
    console = Console(record=True, width=250)
    console.print(renderable)
    return console.export_text()


def cells(text: str, setup: str) -> list[str]:
    """The cells of the row whose first cell is `setup`."""
    for line in text.splitlines():
        parts = [part.strip() for part in line.split("│")]
        if len(parts) > 2 and parts[1] == setup:
            return parts[2:-1]
    raise AssertionError(f"no row {setup!r} in:\n{text}")


def test_one_row_per_setup_one_column_per_level_and_memory() -> None:
    references = [
        Reference("in-process: 1 process x 2 threads", ALL_THREADS),
        Reference("ceiling", CEILING),
    ]
    text = text_of(comparison_table([SPEECHGATE, PIPER_HTTP], references, [1, 2, 4, 8]))
    assert cells(text, "speechgate") == [
        "13.7x, 347 ms",
        "22.7x, 400 ms",
        "27.0x, 900 ms",
        "26.2x, 1800 ms",
        "0.97 / 0.95",
    ]
    # A level the baseline did not run is a dash, not a zero.
    assert cells(text, "piper.http_server")[2:] == [
        "21.5x, 1000 ms",
        "-",
        "1.70 / 1.60",
    ]
    # A reference has no concurrency: its figures stand in every column.
    assert cells(text, "in-process: 1 process x 2 threads") == [
        *["23.8x, 196 ms"] * 4,
        "-",
    ]
    assert cells(text, "ceiling")[0] == "26.0x, 300 ms"


def test_a_server_without_a_pid_has_no_memory() -> None:
    text = text_of(comparison_table([dataclasses.replace(SPEECHGATE, rss_peak=None)], [], [1]))
    assert cells(text, "speechgate") == ["13.7x, 347 ms", "-"]


def test_the_ratios_of_the_issue_with_their_goals() -> None:
    found = {r.label: r for r in ratios(SPEECHGATE, [PIPER_HTTP], ALL_THREADS, CEILINGS)}
    expected = {
        "c=1 first byte p50 / in-process all-threads per-sentence p50": (347 / 196, False),
        "c=1 throughput / in-process all-threads throughput": (13.7 / 23.8, False),
        "c=4 throughput / pinned ceiling": (27.0 / 26.0, True),
        "c=8 throughput / pinned ceiling": (26.2 / 28.0, False),
        "c=1 throughput, speechgate / piper.http_server": (13.7 / 21.5, False),
        "c=1 first byte p50, speechgate / piper.http_server": (347 / 217, False),
        "c=2 throughput, speechgate / piper.http_server": (22.7 / 19.6, True),
        "c=2 first byte p50, speechgate / piper.http_server": (400 / 500, True),
        "c=4 throughput, speechgate / piper.http_server": (27.0 / 21.5, True),
        "c=4 first byte p50, speechgate / piper.http_server": (900 / 1000, True),
    }
    assert {label: r.met for label, r in found.items()} == {
        label: met for label, (_, met) in expected.items()
    }
    for label, (value, _) in expected.items():
        assert found[label].value == pytest.approx(value), label


def test_ratio_lines_say_how_each_was_computed() -> None:
    (line, *_) = ratio_lines(ratios(SPEECHGATE, [], ALL_THREADS, None))
    assert line == (
        "c=1 first byte p50 / in-process all-threads per-sentence p50 = 347 / 196 = 1.77 "
        "(goal <= 1.1: NOT met)"
    )


def test_without_references_or_levels_their_ratios_are_left_out() -> None:
    only_high = ServerRun("speechgate", [stats(2, 20.0, 300)])
    assert ratios(only_high, [], None, None) == []
    assert [r.label for r in ratios(only_high, [], ALL_THREADS, CEILINGS)] == []


def test_the_report_ends_with_the_side_by_side_table(tmp_path: Path) -> None:
    base = make_report(in_process=True)
    assert base.in_process is not None
    report = dataclasses.replace(
        base,
        in_process=dataclasses.replace(
            base.in_process, all_threads=ALL_THREADS, all_threads_threads=2
        ),
        rss_peak=970_000_000,
        rss_end=950_000_000,
        baselines=[PIPER_HTTP],
    )
    text = text_of(render_report(report))
    assert cells(text, "in-process, 1 x 2 threads")[0] == "23.8x, 196 ms"
    assert cells(text, "in-process ceiling, 2 x 1 thread pinned")[0] == "4.5x, 100 ms"
    assert cells(text, "piper.http_server")[0] == "21.5x, 217 ms"
    assert "c=1 throughput, speechgate / piper.http_server" in text
    assert cells(text, "1 process, 2 threads, unpinned")  # in the in-process table too
    write_json(report, tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["baselines"][0]["name"] == "piper.http_server"
    assert data["rss_peak"] == 970_000_000


def test_no_side_by_side_table_without_anything_to_compare() -> None:
    text = text_of(render_report(make_report(in_process=False)))
    assert "side by side" not in text


def test_baselines_alone_make_the_table(tmp_path: Path) -> None:
    report: BenchReport = dataclasses.replace(make_report(in_process=False), baselines=[PIPER_HTTP])
    text = text_of(render_report(report))
    assert "side by side" in text
    assert cells(text, "piper.http_server")[:2] == ["21.5x, 217 ms", "19.6x, 500 ms"]
