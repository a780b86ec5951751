"""Seconds of audio in response bodies: WAV by length, codecs by decoding."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from speechgate.audio.encoders import encode_all
from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk
from speechgate.bench.audio import WAV_HEADER_BYTES, audio_offset, audio_seconds, wav_audio_seconds


def tone(seconds: float, rate: int = 24000) -> PcmChunk:
    t = np.arange(round(seconds * rate)) / rate
    return PcmChunk.from_float(0.3 * np.sin(2 * np.pi * 440 * t), rate)


def wav_header(rate: int, channels: int = 1, extra: bytes = b"") -> bytes:
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * channels * 2, channels * 2, 16)
    return (
        b"RIFF" + struct.pack("<I", 0xFFFFFFFF) + b"WAVE"
        + b"fmt " + struct.pack("<I", 16) + fmt
        + extra
        + b"data" + struct.pack("<I", 0xFFFFFFFF)
    )  # fmt: skip


@pytest.mark.parametrize("rate", [8000, 22050, 24000, 48000])
def test_streamed_wav_from_the_encoder(rate: int) -> None:
    body = encode_all([tone(1.5, rate)], AudioFormat.WAV, rate)
    assert body[:4] == b"RIFF"
    assert wav_audio_seconds(body) == pytest.approx(1.5, abs=1 / rate)


def test_wav_rate_comes_from_the_header() -> None:
    body = wav_header(16000) + bytes(2 * 16000)
    assert len(wav_header(16000)) == WAV_HEADER_BYTES
    assert wav_audio_seconds(body) == 1.0


def test_wav_header_only_and_partial_frame() -> None:
    assert wav_audio_seconds(wav_header(24000)) == 0.0
    assert wav_audio_seconds(wav_header(24000) + bytes(4801)) == 2400 / 24000


def test_wav_stereo_and_extra_chunks() -> None:
    # A LIST chunk of odd size is padded to an even length before the next chunk.
    extra = b"LIST" + struct.pack("<I", 3) + b"abc\x00"
    body = wav_header(24000, channels=2, extra=extra) + bytes(4 * 24000)
    assert wav_audio_seconds(body) == 1.0


@pytest.mark.parametrize("body", [b"", b"RIFF", b"ID3\x03" + bytes(100), wav_header(24000)[:36]])
def test_not_wav(body: bytes) -> None:
    with pytest.raises(ValueError):
        wav_audio_seconds(body)


def test_pcm_is_24khz_s16() -> None:
    assert audio_seconds(bytes(48000), AudioFormat.PCM) == 1.0
    assert audio_seconds(bytes(48001), AudioFormat.PCM) == 1.0


@pytest.mark.parametrize(
    "fmt", [AudioFormat.MP3, AudioFormat.FLAC, AudioFormat.OPUS, AudioFormat.AAC]
)
def test_codecs_are_decoded(fmt: AudioFormat) -> None:
    body = encode_all([tone(2.0)], fmt, 24000)
    # Codec priming and frame padding add a few tens of ms.
    assert audio_seconds(body, fmt) == pytest.approx(2.0, abs=0.1)
    assert audio_seconds(b"", fmt) == 0.0


def test_audio_offset() -> None:
    assert audio_offset(AudioFormat.WAV) == WAV_HEADER_BYTES
    assert audio_offset(AudioFormat.MP3) == 0
