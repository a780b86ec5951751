"""The `speechgate` command, run as users run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.audio import decode_audio

pytestmark = pytest.mark.slow

SPEECHGATE = [sys.executable, "-m", "speechgate.cli"]


@pytest.mark.parametrize(("name", "args"), [("out.mp3", []), ("out.wav", ["--model", "espeak"])])
def test_say_writes_a_playable_file(tmp_path: Path, name: str, args: list[str]) -> None:
    output = tmp_path / name
    result = subprocess.run(
        [*SPEECHGATE, "say", "Hello from the command line.", "-o", str(output), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    audio = decode_audio(output.read_bytes(), output.suffix.lstrip("."))
    assert audio.sample_rate == 24000
    assert audio.duration > 0.8
    assert audio.rms > 0.01


def test_say_rejects_an_unknown_voice(tmp_path: Path) -> None:
    result = subprocess.run(
        [*SPEECHGATE, "say", "Hi.", "-o", str(tmp_path / "x.wav"), "--voice", "nobody"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "nobody" in result.stderr + result.stdout
    assert not (tmp_path / "x.wav").exists()


def test_voices_lists_the_embedded_voice() -> None:
    result = subprocess.run([*SPEECHGATE, "voices"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "en_US-joe-medium" in result.stdout
    assert "alloy" in result.stdout
