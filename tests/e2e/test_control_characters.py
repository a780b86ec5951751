"""Control characters in the input never reach an engine: speech comes out whole."""

from __future__ import annotations

import json
from collections.abc import Callable

import openai
import pytest

from tests.helpers.audio import decode_audio
from tests.helpers.server import RunningServer, sdk_client
from tests.helpers.streaming import session_events, speech_session

pytestmark = pytest.mark.slow

CLEAN = "Hello world. The second sentence is spoken too."
# A NUL in the first segment, and one after it (which used to cut the stream short).
DIRTY = [
    "Hello\u0000 world. The second sentence is spoken too.",
    "Hello world. The second\u0000 sentence\u0007 is\u009b spoken\ufffe too.",
]


def pcm_seconds(client: openai.OpenAI, model: str, text: str) -> float:
    body = client.audio.speech.create(model=model, voice="alloy", input=text, response_format="pcm")
    return decode_audio(body.content, "pcm").duration


@pytest.fixture(scope="module")
def clean_seconds(server: RunningServer) -> Callable[[str], float]:
    """CLEAN's duration from a model, spoken once for all the texts it is compared with."""
    measured: dict[str, float] = {}

    def seconds(model: str) -> float:
        if model not in measured:
            with sdk_client(server) as client:
                measured[model] = pcm_seconds(client, model, CLEAN)
        return measured[model]

    return seconds


@pytest.mark.parametrize("text", DIRTY)
@pytest.mark.parametrize("model", ["piper", "espeak"])
def test_control_characters_are_dropped_before_the_engine(
    client: openai.OpenAI, clean_seconds: Callable[[str], float], model: str, text: str
) -> None:
    clean = clean_seconds(model)
    dirty = pcm_seconds(client, model, text)
    # espeak-ng's timing is deterministic; Piper's varies a little from run to run.
    assert dirty == pytest.approx(clean, rel=0.02 if model == "espeak" else 0.25)


def test_input_of_control_characters_only_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.audio.speech.create(model="piper", voice="alloy", input="\u0000\u0001 \u0002")
    assert raised.value.body["param"] == "input"  # type: ignore[index]


def test_control_characters_in_a_streaming_session_are_dropped(
    clean_seconds: Callable[[str], float], server: RunningServer
) -> None:
    clean = clean_seconds("espeak")
    with speech_session(server, response_format="pcm") as ws:
        for part in DIRTY[1].split(" "):
            ws.send(json.dumps({"type": "input_text.delta", "delta": part + " "}))
        ws.send(json.dumps({"type": "input_text.done"}))
        events, audio = session_events(ws)
    assert events[-1]["type"] == "session.done"
    assert all("\u0000" not in e.get("text", "") for e in events)
    assert decode_audio(audio, "pcm").duration == pytest.approx(clean, rel=0.02)
