"""The report's table, JSON and plot, from synthetic numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from speechgate.bench.report import (
    BenchReport,
    render_report,
    write_json,
    write_plot,
)
from tests.helpers.bench import make_report


def rendered(report: BenchReport) -> str:
    console = Console(record=True, width=200)
    console.print(render_report(report))
    return console.export_text()


def test_table_rows() -> None:
    text = rendered(make_report())
    assert "model=piper" in text
    # level 2: one ok, one 429, one 503; 1.5 audio s over 2 s
    assert any(
        line.split("│")[1:6]
        and [c.strip() for c in line.split("│")[1:6]] == ["2", "1", "1", "503: 1", "0.8"]
        for line in text.splitlines()
    )
    assert "ceiling: 2 processes, 1 thread each" in text
    # best server level 3.8 audio s/s (level 1) over the ceiling beside it, 4.5
    assert "3.8 audio s/s / ceiling 4.5 = 0.83  (the ceiling beside it; its slices" in text
    assert "before the first level and after each: 4.4, 4.6, 4.2)" in text
    assert "server 120 ms - in-process 100 ms = +20 ms" in text


def test_table_without_in_process() -> None:
    text = rendered(make_report(in_process=False))
    assert "ceiling" not in text


def test_json_has_everything(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    write_json(make_report(), path)
    data = json.loads(path.read_text())
    assert [level["concurrency"] for level in data["levels"]] == [1, 2]
    assert data["levels"][1]["errors"] == {"503": 1}
    assert len(data["samples"][1]) == 3
    assert data["in_process"]["comparison"]["gateway_overhead_ms"] == pytest.approx(20.0)


@pytest.mark.parametrize("in_process", [True, False])
def test_plot_is_a_png(tmp_path: Path, in_process: bool) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "out.png"
    write_plot(make_report(in_process=in_process), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
