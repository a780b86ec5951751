"""ElevenLabs' output format names on OpenAI's route, through the official openai SDK against
a real server: every name decoded and checked (rate, duration, energy), G.711 against the PCM
it encodes, streaming, `"stream": true`, the WebSocket, and the errors for names not listed."""

from __future__ import annotations

import json
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import openai
import pytest
from websockets.sync.client import connect

from tests.helpers.audio import DecodedAudio, decode_audio
from tests.helpers.formats import ELEVENLABS
from tests.helpers.server import RunningServer
from tests.helpers.streaming import session_events

pytestmark = pytest.mark.slow

# About 3 s of speech from espeak-ng, whose timing is deterministic.
TEXT = "The quick brown fox jumps over the lazy dog. Then it runs far away into the quiet woods."
LONG = " ".join(f"Sentence {n} goes on for a while with plain words." for n in range(30))
SILENCE_RMS = 0.01
CONTENT_TYPES = {
    "pcm": "audio/pcm",
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "ulaw": "audio/basic",
    "alaw": "audio/x-alaw-basic",
}


def spelled(name: str) -> tuple[str, int, int | None]:
    """(codec, rate, kb/s) as the name spells them: the test's own reading of the name."""
    codec, rate, *kbps = name.split("_")
    return codec, int(rate), int(kbps[0]) if kbps else None


def speak(client: openai.OpenAI, name: str, text: str = TEXT) -> tuple[bytes, str]:
    # The SDK types response_format as OpenAI's six names, but sends any string unchanged.
    response = client.audio.speech.create(
        model="espeak",
        voice="alloy",
        input=text,
        response_format=name,  # type: ignore[arg-type]
    )
    return response.content, response.response.headers["content-type"]


@pytest.fixture(scope="module")
def reference(server: RunningServer) -> DecodedAudio:
    """TEXT as OpenAI's raw pcm (24 kHz): what every other format must last as long as."""
    body = {"model": "espeak", "voice": "alloy", "input": TEXT, "response_format": "pcm"}
    response = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return decode_audio(response.content, "pcm", pcm_rate=24000)


@pytest.mark.parametrize("name", ELEVENLABS)
def test_every_elevenlabs_format_is_spoken_at_its_rate(
    client: openai.OpenAI, name: str, reference: DecodedAudio
) -> None:
    codec, rate, kbps = spelled(name)

    data, content_type = speak(client, name)

    assert content_type == CONTENT_TYPES[codec]
    # Headerless bodies are read at the rate the name promises: sent at any other rate, they
    # would last longer or shorter than the reference.
    audio = decode_audio(data, codec, pcm_rate=rate)
    assert audio.sample_rate == rate
    assert audio.duration == pytest.approx(reference.duration, rel=0.05)
    assert audio.rms == pytest.approx(reference.rms, rel=0.25)
    assert audio.rms > SILENCE_RMS
    if codec in ("pcm", "ulaw", "alaw"):
        width = 2 if codec == "pcm" else 1
        assert len(data) == width * len(audio.samples)
    if kbps is not None:
        # Constant bit rate for mp3; Opus (constrained VBR) spends less on pauses, and Ogg
        # pages add their headers.
        bits_per_second = len(data) * 8 / audio.duration
        assert 0.5 * kbps * 1000 < bits_per_second < kbps * 1000 + 9000


@pytest.mark.parametrize("prefix", ["mp3_44100", "opus_48000"])
def test_a_higher_named_bit_rate_gives_a_bigger_body(client: openai.OpenAI, prefix: str) -> None:
    names = [f"{prefix}_{kbps}" for kbps in (32, 64, 96, 128, 192)]

    sizes = [len(speak(client, name)[0]) for name in names]

    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes), sizes


def envelope(audio: DecodedAudio) -> npt.NDArray[np.float64]:
    """RMS per 10 ms."""
    step = audio.sample_rate // 100
    frames = audio.samples[: len(audio.samples) // step * step].astype(np.float64)
    return np.sqrt(np.mean(np.square(frames.reshape(-1, step)), axis=1))


@pytest.mark.parametrize(("law", "other"), [("ulaw", "alaw"), ("alaw", "ulaw")])
def test_g711_decodes_back_to_the_pcm_it_encodes(
    client: openai.OpenAI, law: str, other: str
) -> None:
    # The same text as pcm_8000 is the source. espeak-ng's noise (fricatives) is random, so
    # two requests never match sample for sample (two pcm_8000 bodies: 0.6 dB "SNR"): the
    # loudness over time is compared instead. The sample-exact SNR against a known source is
    # tests/audio/test_encoders.py's.
    source = decode_audio(speak(client, "pcm_8000")[0], "pcm", pcm_rate=8000)
    body = speak(client, f"{law}_8000")[0]

    decoded = decode_audio(body, law, pcm_rate=8000)

    assert len(decoded.samples) == len(source.samples) == len(body)
    assert decoded.rms == pytest.approx(source.rms, rel=0.05)
    # Measured: 0.998 for either law, as for two pcm_8000 bodies.
    assert np.corrcoef(envelope(decoded), envelope(source))[0, 1] > 0.98
    # Read with the other law, the body is wrong (measured: three times too loud).
    misread = decode_audio(body, other, pcm_rate=8000)
    assert not 0.67 < misread.rms / source.rms < 1.5


@pytest.mark.parametrize(
    "name", ["pcm_16000", "wav_22050", "ulaw_8000", "alaw_8000", "mp3_22050_32", "opus_48000_32"]
)
def test_each_kind_streams_before_the_end(client: openai.OpenAI, name: str) -> None:
    codec, rate, _ = spelled(name)
    # At speed 4: as many sentences, each sent as it is spoken, a quarter of the audio to encode.
    with client.audio.speech.with_streaming_response.create(
        model="espeak",
        voice="alloy",
        input=LONG,
        response_format=name,  # type: ignore[arg-type]
        speed=4.0,
    ) as response:
        assert response.headers["content-type"] == CONTENT_TYPES[codec]
        parts = [part for part in response.iter_bytes() if part]
    # Thirty sentences, sent as they are spoken: many pieces, the first a small part.
    assert len(parts) > 10
    assert len(parts[0]) < sum(map(len, parts)) / 5
    whole = decode_audio(b"".join(parts), codec, pcm_rate=rate)
    assert whole.duration > 20 / 4 and whole.rms > SILENCE_RMS


def test_stream_true_is_accepted(server: RunningServer, reference: DecodedAudio) -> None:
    # What a voice-agent client sends, ElevenLabs-style.
    body = {
        "model": "espeak",
        "voice": "alloy",
        "input": TEXT,
        "response_format": "pcm_24000",
        "stream": True,
    }
    response = httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=60)

    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/pcm"
    audio = decode_audio(response.content, "pcm", pcm_rate=24000)
    assert len(audio.samples) == len(reference.samples)
    assert audio.rms == pytest.approx(reference.rms, rel=0.05)


@pytest.mark.parametrize(
    "name", ["pcm_12345", "mp3_44100_999", "opus_24000_64", "ulaw", "alaw_16000", "PCM_16000"]
)
def test_a_name_not_listed_is_a_400_listing_the_accepted_ones(
    client: openai.OpenAI, name: str
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        speak(client, name)

    error = raised.value.response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "response_format"
    assert error["code"] == "invalid_value"
    assert f"unknown format {name!r}" in error["message"]
    for accepted in ("mp3", "pcm_16000", "ulaw_8000", "alaw_8000", "opus_48000_192"):
        assert accepted in error["message"]


def test_sample_rate_must_agree_with_a_named_rate(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.audio.speech.create(
            model="espeak",
            voice="alloy",
            input="Hi.",
            response_format="pcm_16000",  # type: ignore[arg-type]
            extra_body={"sample_rate": 24000},
        )
    assert raised.value.response.json()["error"]["param"] == "sample_rate"

    agreeing = client.audio.speech.create(
        model="espeak",
        voice="alloy",
        input="Hi.",
        response_format="pcm_16000",  # type: ignore[arg-type]
        extra_body={"sample_rate": 16000},
    )
    assert decode_audio(agreeing.content, "pcm", pcm_rate=16000).rms > SILENCE_RMS


def _session(
    server: RunningServer, options: dict[str, Any], text: str | None = TEXT
) -> tuple[list[dict[str, Any]], bytes]:
    """A session's events and audio; with `text` None, none is sent (a session refused at
    `session.update` may close before more is written)."""
    url = server.url.replace("http", "ws") + "/v1/audio/speech/stream"
    with connect(url) as ws:
        ws.send(json.dumps({"type": "session.update", "session": options}))
        if text is not None:
            ws.send(json.dumps({"type": "input_text.delta", "delta": text}))
            ws.send(json.dumps({"type": "input_text.done"}))
        return session_events(ws)


def test_a_websocket_session_speaks_ulaw(server: RunningServer, reference: DecodedAudio) -> None:
    options = {"model": "espeak", "voice": "alloy", "response_format": "ulaw_8000"}

    events, audio = _session(server, options)

    created = events[0]["session"]
    assert created["response_format"] == "ulaw_8000"
    assert created["content_type"] == "audio/basic"
    assert created["sample_rate"] == 8000
    assert events[-1]["type"] == "session.done"
    decoded = decode_audio(audio, "ulaw", pcm_rate=8000)
    assert decoded.duration == pytest.approx(reference.duration, rel=0.05)
    assert decoded.rms > SILENCE_RMS


def test_a_websocket_session_refuses_a_name_not_listed(server: RunningServer) -> None:
    options = {"model": "espeak", "voice": "alloy", "response_format": "pcm_12345"}

    events, audio = _session(server, options, text=None)

    assert audio == b""
    assert events[-1]["type"] == "error"
    assert events[-1]["error"]["param"].endswith("response_format")
    assert "pcm_16000" in events[-1]["error"]["message"]
