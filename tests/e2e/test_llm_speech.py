"""Speaking an LLM's answer while it is still being written, through the chat relay."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from speechgate.cli import app
from speechgate.spoken_chat import speak_answer
from tests.helpers.audio import decode_audio
from tests.helpers.server import RunningServer, running_server
from tests.helpers.settings import make_settings
from tests.helpers.upstream import FakeUpstream, running_upstream
from tests.helpers.waiting import until

pytestmark = pytest.mark.slow

FIRST = ["The", " answer", " is", " forty", "-two", "."]
SECOND = [" It", " has", " always", " been", " so", "."]


@pytest.fixture(scope="module")
def module_upstream() -> Iterator[FakeUpstream]:
    with running_upstream() as fake:
        yield fake


@pytest.fixture
def upstream(module_upstream: FakeUpstream) -> FakeUpstream:
    module_upstream.reset()
    module_upstream.tokens = FIRST + SECOND
    return module_upstream


@pytest.fixture(scope="module")
def relay(module_upstream: FakeUpstream) -> Iterator[RunningServer]:
    settings = make_settings(
        engines=["espeak"],
        default_engine="espeak",
        pool={"workers": 1},
        llm={"base_url": module_upstream.url},
    )
    with running_server(settings) as server:
        yield server


def chat(*args: str) -> Result:
    """`speechgate chat` in this process (typer's runner): what the command does, not how a
    process starts, is the subject; the entry point has tests of its own."""
    return CliRunner().invoke(app, ["chat", *args])


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
    result = chat("Why?", "--speak", str(output), "--url", relay.url, "--model", "espeak")
    assert result.exit_code == 0, result.output
    assert "The answer is forty-two." in result.stdout
    audio = decode_audio(output.read_bytes(), "mp3")
    assert audio.duration > 2.0
    assert audio.rms > 0.01


def test_chat_command_without_speech_prints_the_answer(
    relay: RunningServer, upstream: FakeUpstream
) -> None:
    result = chat("Why?", "--url", relay.url)
    assert result.exit_code == 0, result.output
    assert "It has always been so." in result.stdout
