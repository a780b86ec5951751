"""The `speechgate bench` command: argument checks, and one run against the test server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from speechgate.cli import app
from tests.helpers.server import RunningServer


@pytest.mark.parametrize(
    "args",
    [
        ["--requests-per-level", "2", "--duration", "1"],
        ["--levels", "1,x"],
        ["--levels", "0,1"],
        ["--texts", "longest"],
    ],
)
def test_bad_arguments_fail_before_any_request(args: list[str]) -> None:
    result = CliRunner().invoke(app, ["bench", "--url", "http://127.0.0.1:1", *args])
    assert result.exit_code == 2


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--compare", "nope"], "piper-http, pocket-serve, not 'nope'"),
        (["--compare", "piper-http", "--piper-model", "/no/model.onnx"], "no such file"),
        (["--compare", "pocket-serve", "--pocket-config", "/no/config.yaml"], "--pocket-config"),
        (["--compare", "pocket-serve", "--pocket-config", __file__], "--pocket-voice"),
    ],
)
def test_a_baseline_that_cannot_start_fails_before_any_request(
    args: list[str], reason: str
) -> None:
    result = CliRunner().invoke(app, ["bench", "--url", "http://127.0.0.1:1", *args])
    assert result.exit_code == 2
    assert reason in " ".join(result.output.replace("│", " ").split())


@pytest.mark.slow
def test_bench_command(server: RunningServer, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    args = ["--url", server.url, "--model", "espeak", "--levels", "1,2", "--texts", "short"]
    args += ["--requests-per-level", "2", "--json", str(tmp_path / "r.json")]
    args += ["--plot", str(tmp_path / "r.png")]
    result = CliRunner().invoke(app, ["bench", *args])
    assert result.exit_code == 0, result.output
    assert "model=espeak" in result.output
    levels = json.loads((tmp_path / "r.json").read_text())["levels"]
    assert [(level["concurrency"], level["completed"]) for level in levels] == [(1, 2), (2, 2)]
    samples = json.loads((tmp_path / "r.json").read_text())["samples"]
    assert {sample["kind"] for level in samples for sample in level} == {"short"}
    assert (tmp_path / "r.png").stat().st_size > 0
