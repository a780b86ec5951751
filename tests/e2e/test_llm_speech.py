"""Speaking an LLM's answer while it is still being written, through the chat relay."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from speechgate.spoken_chat import speak_answer
from tests.helpers.audio import decode_audio
from tests.helpers.server import RunningServer, running_server
from tests.helpers.settings import make_settings
from tests.helpers.upstream import FakeUpstream, running_upstream
from tests.helpers.waiting import until

pytestmark = pytest.mark.slow

FIRST = ["The", " answer", " is", " forty", "-two", "."]
SECOND = [" It", " has", " always", " been", " so", "."]


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with running_upstream(FakeUpstream(tokens=FIRST + SECOND)) as fake:
        yield fake


@pytest.fixture
def relay(upstream: FakeUpstream) -> Iterator[RunningServer]:
    settings = make_settings(
        engines=["espeak"],
        default_engine="espeak",
        pool={"workers": 1},
        llm={"base_url": upstream.url},
    )
    with running_server(settings) as server:
        yield server


def test_first_sentence_is_heard_before_the_second_is_written(
    relay: RunningServer, upstream: FakeUpstream
) -> None:
    # The upstream stops after the first word of sentence 2 (which shows sentence 1 is over)
    # until released: any audio before the release is sentence 1 spoken early.
    upstream.hold_after = len(FIRST) + 1

    async def scenario() -> tuple[bool, bytes, str]:
        output = io.BytesIO()
        speech = {"model": "espeak", "voice": "alloy", "response_format": "pcm"}
        task = asyncio.create_task(
            speak_answer(relay.url, [{"role": "user", "content": "?"}], "m", speech, output)
        )
        await until(lambda: output.tell() > 0)
        heard_early = upstream.held.is_set() and not upstream.finished.is_set()
        upstream.release()
        answer = await task
        return heard_early, output.getvalue(), answer.text

    heard_early, audio, text = asyncio.run(scenario())
    assert heard_early
    assert text == "".join(FIRST + SECOND)
    decoded = decode_audio(audio, "pcm")
    assert decoded.duration > 2.0  # both sentences
    assert decoded.rms > 0.01


def test_chat_command_speaks_the_answer_into_a_file(
    relay: RunningServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    output = tmp_path / "answer.mp3"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "speechgate.cli",
            "chat",
            "Why?",
            "--speak",
            str(output),
            "--url",
            relay.url,
            "--model",
            "espeak",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "The answer is forty-two." in result.stdout
    audio = decode_audio(output.read_bytes(), "mp3")
    assert audio.duration > 2.0
    assert audio.rms > 0.01


def test_chat_command_without_speech_prints_the_answer(
    relay: RunningServer, upstream: FakeUpstream
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "speechgate.cli", "chat", "Why?", "--url", relay.url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "It has always been so." in result.stdout
