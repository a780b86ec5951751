"""What a remote provider sends its OpenAI-compatible upstream, built from the neutral request."""

from __future__ import annotations

import base64

from speechgate.api.schemas import CreateSpeechRequest
from speechgate.audio.formats import parse_format
from speechgate.routing.providers import openai_body
from speechgate.speech import SpeechRequest


def test_a_request_at_its_defaults_sends_only_openai_fields() -> None:
    request = SpeechRequest(model="tts-1", voice="alloy", format=parse_format("wav"), text="Hi.")
    assert openai_body(request) == {
        "model": "tts-1",
        "input": "Hi.",
        "voice": "alloy",
        "response_format": "wav",
    }


def test_every_field_the_client_set_reaches_the_upstream_as_it_was_sent() -> None:
    clip = bytes(range(256))
    sent = {
        "model": "tts-1",
        "input": "Hallo.",
        "voice": "x",
        "response_format": "pcm",
        "speed": 1.5,
        "stream_format": "sse",
        "instructions": "Calmly.",
        "sample_rate": 16000,
        "seed": 7,
        "language": "de",
        "reference_audio": base64.b64encode(clip).decode(),
    }
    wire = CreateSpeechRequest.model_validate(sent)
    request = wire.to_speech(wire.input, wire.stream_format)
    assert request.reference_audio == clip
    assert openai_body(request) == sent


def test_language_hint_reaches_the_upstream_as_language() -> None:
    wire = CreateSpeechRequest.model_validate(
        {"model": "tts-1", "input": "Hallo.", "voice": "onyx", "language_hint": "de"}
    )
    assert openai_body(wire.to_speech(wire.input))["language"] == "de"
