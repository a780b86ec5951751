"""What a remote provider sends its upstream (OpenAI-compatible or ElevenLabs'), built from
the neutral request, and how the upstream's errors come back."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

import httpx
import pytest

from speechgate.api.schemas import CreateSpeechRequest
from speechgate.audio.formats import parse_format
from speechgate.errors import InvalidRequest, UpstreamBadResponse, UpstreamRejected
from speechgate.routing.providers import (
    elevenlabs_output_format,
    elevenlabs_request,
    openai_body,
    raise_for_elevenlabs_error,
)
from speechgate.speech_request import SpeechRequest


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
        "timestamp_granularities": ["word"],
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


def eleven(fmt: str, **fields: Any) -> SpeechRequest:
    return SpeechRequest(model="m", voice="v", format=parse_format(fmt), text="Hi.", **fields)


@pytest.mark.parametrize(
    ("fmt", "fields", "name"),
    [
        ("ulaw_8000", {}, "ulaw_8000"),  # ElevenLabs' own names pass as they are
        ("mp3_22050_32", {}, "mp3_22050_32"),
        ("pcm", {}, "pcm_24000"),  # OpenAI's pcm is 24 kHz unless a rate is asked for
        ("pcm", {"sample_rate": 16000}, "pcm_16000"),
        ("wav", {}, "wav_24000"),
        ("mp3", {}, "mp3_44100_128"),
        ("mp3", {"sample_rate": 24000}, "mp3_24000_48"),
        ("opus", {}, "opus_48000_64"),
    ],
)
def test_each_format_elevenlabs_can_send_gets_its_name(
    fmt: str, fields: dict[str, Any], name: str
) -> None:
    assert elevenlabs_output_format(eleven(fmt, **fields)) == name


@pytest.mark.parametrize(
    ("fmt", "fields"),
    [("flac", {}), ("aac", {}), ("pcm", {"sample_rate": 11025}), ("opus", {"sample_rate": 16000})],
)
def test_a_format_elevenlabs_cannot_send_is_the_clients_error(
    fmt: str, fields: dict[str, Any]
) -> None:
    with pytest.raises(InvalidRequest) as raised:
        elevenlabs_output_format(eleven(fmt, **fields))
    assert raised.value.param == "response_format" and raised.value.status_code == 400


def test_the_elevenlabs_body_carries_speed_language_and_seed_only_when_set() -> None:
    assert elevenlabs_request(eleven("mp3")) == (
        "v1/text-to-speech/v/stream",
        {"output_format": "mp3_44100_128"},
        {"text": "Hi.", "model_id": "m"},
    )
    path, _, body = elevenlabs_request(
        replace(eleven("pcm", speed=1.1, language="de-AT", seed=3), voice="a b/c")
    )
    assert path == "v1/text-to-speech/a%20b%2Fc/stream"
    assert body["voice_settings"] == {"speed": 1.1}
    assert (body["language_code"], body["seed"]) == ("de", 3)


def test_a_request_for_word_times_goes_to_the_streaming_with_timestamps_route() -> None:
    path, query, _ = elevenlabs_request(replace(eleven("pcm"), word_times=True))
    assert path == "v1/text-to-speech/v/stream/with-timestamps"
    assert query == {"output_format": "pcm_24000"}


@pytest.mark.parametrize(
    ("status", "payload", "message", "code"),
    [
        (
            404,
            {"detail": {"status": "voice_not_found", "message": "No."}},
            "No.",
            "voice_not_found",
        ),
        (
            422,
            {"detail": [{"loc": ["body", "text"], "msg": "field required"}]},
            "field required",
            None,
        ),
        (401, {"detail": "Unauthorized"}, "Unauthorized", None),
    ],
)
def test_an_elevenlabs_error_is_relayed_with_its_status(
    status: int, payload: Any, message: str, code: str | None
) -> None:
    response = httpx.Response(status, json=payload, headers={"retry-after": "3"})
    with pytest.raises(UpstreamRejected) as raised:
        raise_for_elevenlabs_error(response, "upstream")
    error = raised.value
    assert (error.status_code, error.message, error.code) == (status, message, code)
    assert error.headers == {"retry-after": "3"}


def test_an_error_without_elevenlabs_body_is_a_bad_response() -> None:
    with pytest.raises(UpstreamBadResponse):
        raise_for_elevenlabs_error(httpx.Response(503, text="<html>down</html>"), "upstream")
