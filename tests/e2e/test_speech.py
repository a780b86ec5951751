"""POST /v1/audio/speech through the official openai SDK against a real server and engines."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import openai
import pytest

from speechgate.audio.formats import OPENAI_FORMATS, AudioFormat
from tests.helpers.audio import DecodedAudio, decode_audio
from tests.helpers.server import RunningServer, sdk_client

pytestmark = pytest.mark.slow

# About 3 s of speech: long enough that codec priming (< 0.1 s) stays far inside 5 %.
TEXT = "The quick brown fox jumps over the lazy dog. Then it runs far away into the quiet woods."
SILENCE_RMS = 0.01


def expected_rate(fmt: AudioFormat) -> int:
    # Ogg Opus always decodes at 48 kHz, the rate of Opus itself; everything else is 24 kHz.
    return 48000 if fmt is AudioFormat.OPUS else 24000


def assert_speech(audio: DecodedAudio, fmt: AudioFormat, reference_seconds: float) -> None:
    assert audio.sample_rate == expected_rate(fmt)
    assert audio.duration == pytest.approx(reference_seconds, rel=0.05)
    assert audio.rms > SILENCE_RMS


@pytest.fixture(scope="module")
def espeak_pcm_seconds(server: RunningServer) -> float:
    """The raw PCM duration of TEXT: espeak-ng's timing is deterministic, Piper's is not."""
    with sdk_client(server) as client:
        body = client.audio.speech.create(
            model="espeak", voice="alloy", input=TEXT, response_format="pcm"
        ).content
    return decode_audio(body, "pcm").duration


@pytest.mark.parametrize("fmt", OPENAI_FORMATS)
def test_every_format_decodes_to_the_same_speech(
    client: openai.OpenAI, fmt: AudioFormat, espeak_pcm_seconds: float
) -> None:
    response = client.audio.speech.create(
        model="espeak", voice="alloy", input=TEXT, response_format=fmt.value
    )
    assert response.response.headers["content-type"] == fmt.content_type
    assert_speech(decode_audio(response.content, fmt.value), fmt, espeak_pcm_seconds)


@pytest.mark.parametrize("fmt", OPENAI_FORMATS)
def test_piper_streams_every_format(client: openai.OpenAI, fmt: AudioFormat) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="nova", input=TEXT, response_format=fmt.value
    ) as response:
        assert response.headers["content-type"] == fmt.content_type
        assert response.headers["x-speechgate-engine"] == "piper"
        parts = list(response.iter_bytes())
    audio = decode_audio(b"".join(parts), fmt.value)
    assert audio.sample_rate == expected_rate(fmt)
    assert 2.0 < audio.duration < 8.0
    assert audio.rms > SILENCE_RMS


def test_async_client(server: RunningServer) -> None:
    async def speak() -> bytes:
        async with openai.AsyncOpenAI(
            base_url=f"{server.url}/v1", api_key="unused", max_retries=0
        ) as client:
            response = await client.audio.speech.create(
                model="tts-1-hd",
                voice={"id": "alloy"},
                input="Hello from the async client.",
                response_format="wav",
            )
        # One more loop turn lets the closed connection's transport finish closing.
        await asyncio.sleep(0)
        return response.content

    audio = decode_audio(asyncio.run(speak()), "wav")
    assert audio.sample_rate == 24000
    assert audio.duration > 0.5
    assert audio.rms > SILENCE_RMS


@pytest.mark.parametrize("model", ["espeak", "piper"])
def test_speed_scales_duration(client: openai.OpenAI, model: str) -> None:
    text = TEXT + " " + TEXT

    def seconds(speed: float) -> float:
        body = client.audio.speech.create(
            model=model, voice="alloy", input=text, response_format="pcm", speed=speed
        ).content
        return decode_audio(body, "pcm").duration

    normal = seconds(1.0)
    assert seconds(2.0) / normal == pytest.approx(0.5, rel=0.10)
    assert seconds(0.5) / normal == pytest.approx(2.0, rel=0.10)


def test_sample_rate_extension(client: openai.OpenAI) -> None:
    body = client.audio.speech.create(
        model="espeak",
        voice="alloy",
        input="Sixteen kilohertz.",
        response_format="pcm",
        extra_body={"sample_rate": 16000},
    ).content
    wav = client.audio.speech.create(
        model="espeak",
        voice="alloy",
        input="Sixteen kilohertz.",
        response_format="wav",
        extra_body={"sample_rate": 16000},
    ).content
    assert decode_audio(wav, "wav").sample_rate == 16000
    assert decode_audio(body, "pcm", pcm_rate=16000).duration == pytest.approx(
        decode_audio(wav, "wav").duration, rel=0.05
    )


def test_instructions_are_accepted_and_reported_ignored(client: openai.OpenAI) -> None:
    response = client.audio.speech.with_raw_response.create(
        model="tts-1",
        voice="alloy",
        input="Calmly.",
        instructions="Speak calmly.",
    )
    assert response.headers["x-speechgate-instructions"] == "ignored"
    assert decode_audio(response.content, "mp3").rms > SILENCE_RMS


def test_voice_names_are_normalised(client: openai.OpenAI) -> None:
    for voice in ("EN-US_Joe-Medium", "Alloy", " nova "):
        body = client.audio.speech.create(
            model="TTS-1", voice=voice, input="Hi.", response_format="wav"
        ).content
        assert decode_audio(body, "wav").rms > SILENCE_RMS


def _sse_events(body: str) -> list[dict[str, object]]:
    return [
        json.loads(line.removeprefix("data: "))
        for line in body.splitlines()
        if line.startswith("data: ")
    ]


@pytest.mark.parametrize("fmt", ["mp3", "wav", "pcm"])
def test_sse_deltas_then_done_with_usage(server: RunningServer, fmt: str) -> None:
    payload = {
        "model": "espeak",
        "voice": "alloy",
        "input": TEXT,
        "response_format": fmt,
        "stream_format": "sse",
    }
    response = httpx.post(f"{server.url}/v1/audio/speech", json=payload, timeout=60)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _sse_events(response.text)
    kinds = [event["type"] for event in events]
    assert kinds[-1] == "speech.audio.done"
    assert set(kinds[:-1]) == {"speech.audio.delta"} and len(kinds) > 2
    usage = events[-1]["usage"]
    assert isinstance(usage, dict)
    assert usage["input_tokens"] == len(TEXT)
    assert usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]

    joined = b"".join(base64.b64decode(str(event["audio"])) for event in events[:-1])
    from_sse = decode_audio(joined, fmt)
    direct = decode_audio(
        httpx.post(
            f"{server.url}/v1/audio/speech", json={**payload, "stream_format": "audio"}, timeout=60
        ).content,
        fmt,
    )
    assert from_sse.sample_rate == direct.sample_rate
    assert from_sse.duration == pytest.approx(direct.duration, rel=0.02)
    assert from_sse.rms > SILENCE_RMS
    # 20 ms frames of speech, as the done event counts them.
    assert usage["output_tokens"] == pytest.approx(from_sse.duration * 50, rel=0.05)
