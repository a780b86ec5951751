"""The OpenAI body's translation into the protocol-neutral request."""

from __future__ import annotations

import pytest

from speechgate.api.schemas import CreateSpeechRequest, SpeechOptions
from speechgate.audio.formats import parse_format
from speechgate.errors import InvalidRequest
from speechgate.speech_request import SpeechRequest


def test_the_body_becomes_the_neutral_request() -> None:
    body = CreateSpeechRequest.model_validate(
        {"model": "tts-1", "input": "Hi.", "voice": {"id": "voice_1"}, "language_hint": "de"}
    )
    assert body.to_speech(body.input, body.stream_format) == SpeechRequest(
        model="tts-1", voice="voice_1", format=parse_format("mp3"), text="Hi.", language="de"
    )


@pytest.mark.parametrize("reference_audio", ["not base64!", "¼½", "AAA"])
def test_reference_audio_that_is_not_base64_is_the_clients_error(reference_audio: str) -> None:
    options = SpeechOptions(model="pocket", voice="x", reference_audio=reference_audio)
    with pytest.raises(InvalidRequest) as refused:
        options.to_speech("Hi.")
    assert (refused.value.param, refused.value.code) == ("reference_audio", "invalid_audio")


def test_language_and_its_alias_may_not_disagree() -> None:
    options = SpeechOptions(model="tts-1", voice="alloy", language="de", language_hint="en")
    with pytest.raises(InvalidRequest) as refused:
        options.to_speech()
    assert refused.value.param == "language_hint"
