"""Voice prompts from uploads: any common format decodes to mono at the engine's rate."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from speechgate.audio.clip import UndecodableAudio, decode_clip, speech_seconds, trim
from speechgate.audio.pcm import PcmChunk


def tone(seconds: float, rate: int, channels: int = 1, level: float = 0.3) -> np.ndarray:
    """A 220 Hz tone, shape (channels, samples), float32."""
    t = np.arange(round(seconds * rate)) / rate
    return np.tile(level * np.sin(2 * np.pi * 220 * t), (channels, 1)).astype(np.float32)


def encode(samples: np.ndarray, rate: int, container: str, codec: str) -> bytes:
    """Encode planar float `samples` (channels, n) with PyAV, as a client's file would be."""
    out = io.BytesIO()
    layout = "mono" if samples.shape[0] == 1 else "stereo"
    with av.open(out, mode="w", format=container) as muxer:
        stream = muxer.add_stream(codec, rate=rate, layout=layout)
        resampler = av.AudioResampler(format=stream.format, layout=layout, rate=rate)
        frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout=layout)
        frame.sample_rate = rate
        for converted in resampler.resample(frame):
            muxer.mux(stream.encode(converted))
        muxer.mux(stream.encode(None))
    return out.getvalue()


@pytest.mark.parametrize(
    ("container", "codec", "rate", "channels"),
    [
        ("wav", "pcm_s16le", 24000, 1),
        ("wav", "pcm_s16le", 48000, 2),
        ("wav", "pcm_s16le", 8000, 1),
        ("mp3", "libmp3lame", 44100, 2),
        ("ogg", "libopus", 48000, 1),
        ("flac", "flac", 16000, 1),
        ("ipod", "aac", 44100, 2),  # .m4a
        ("webm", "libopus", 48000, 2),
    ],
)
def test_common_formats_decode_to_mono_at_the_engine_rate(
    container: str, codec: str, rate: int, channels: int
) -> None:
    data = encode(tone(4.0, rate, channels), rate, container, codec)
    clip = decode_clip(data, 24000)
    assert clip.pcm.sample_rate == 24000
    assert clip.pcm.samples.ndim == 1
    # Codecs pad and trim a little at the edges.
    assert clip.pcm.duration == pytest.approx(4.0, abs=0.1)
    assert clip.speech_seconds == pytest.approx(4.0, abs=0.15)
    rms = np.sqrt(np.mean(clip.pcm.samples.astype(np.float64) ** 2)) / 32768
    assert rms == pytest.approx(0.3 / np.sqrt(2), rel=0.1)


@pytest.mark.parametrize("data", [b"", b"not audio at all" * 100, b"RIFF\x00\x00\x00\x00WAVE"])
def test_what_is_not_audio_is_refused(data: bytes) -> None:
    with pytest.raises(UndecodableAudio):
        decode_clip(data, 24000)


def test_silence_and_quiet_noise_hold_no_speech() -> None:
    rate = 24000
    silent = PcmChunk(np.zeros(4 * rate, np.int16), rate)
    # -60 dBFS of noise: a quiet room, not a voice.
    hiss = np.random.default_rng(0).normal(0, 0.001 * 32768, 4 * rate).astype(np.int16)
    assert speech_seconds(silent) == 0.0
    assert speech_seconds(PcmChunk(hiss, rate)) == 0.0


def test_speech_is_counted_by_loud_frames() -> None:
    rate = 24000
    samples = np.concatenate([np.zeros(rate), tone(2.5, rate)[0], np.zeros(rate)])
    pcm = PcmChunk.from_float(samples, rate)
    assert speech_seconds(pcm) == pytest.approx(2.5, abs=0.02)


def test_trim_drops_leading_silence_and_caps_the_length() -> None:
    rate = 24000
    samples = np.concatenate([np.zeros(rate), tone(5.0, rate)[0]])
    trimmed = trim(PcmChunk.from_float(samples, rate), 3.0)
    assert trimmed.duration == pytest.approx(3.0)
    assert np.any(trimmed.samples[:480] != 0)
