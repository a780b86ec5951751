"""Voice prompts from uploads: any common format decodes to mono at the engine's rate."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from speechgate.audio.clip import UndecodableAudio, decode_clip, speech_seconds, trim
from speechgate.audio.pcm import PcmChunk
from tests.helpers.audio import flac_bomb, piper_speech, wav_file


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
    clip = decode_clip(data, 24000, max_seconds=35.0)
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
        decode_clip(data, 24000, max_seconds=35.0)


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


class CountingReader(io.BytesIO):
    """A file that counts the bytes read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.bytes_read += len(data)
        return data


def test_a_decompression_bomb_is_decoded_only_up_to_the_cap() -> None:
    # 4 h of DC in 156 KB: decoded whole at 24 kHz, 690 MB of samples.
    bomb = flac_bomb(hours=4)
    source = CountingReader(bomb)
    clip = decode_clip(source, 24000, max_seconds=35.0)
    assert clip.pcm.duration == pytest.approx(35.0, abs=0.001)
    # Decoding stopped early: one 32 KiB buffer of the file was read, not all of it.
    assert source.bytes_read < len(bomb) / 2


def test_a_long_file_is_cut_at_the_cap() -> None:
    wav = encode(tone(120.0, 8000), 8000, "wav", "pcm_s16le")
    source = CountingReader(wav)
    clip = decode_clip(source, 24000, max_seconds=10.0)
    assert clip.pcm.duration == pytest.approx(10.0, abs=0.001)
    assert source.bytes_read < len(wav) / 4


@pytest.mark.parametrize("rate", [1, 100, 4000])
def test_absurd_sample_rates_are_refused(rate: int) -> None:
    # 14 KiB at 1 Hz: two hours of audio, 166 M samples once resampled.
    pcm = PcmChunk(np.random.default_rng(0).integers(-8000, 8000, 7000).astype(np.int16), rate)
    with pytest.raises(UndecodableAudio, match="sample rate"):
        decode_clip(wav_file(pcm), 24000, max_seconds=35.0)


_T = np.arange(4 * 24000) / 24000


def test_real_speech_is_not_steady() -> None:
    speech = decode_clip(wav_file(piper_speech()), 24000, max_seconds=35.0)
    assert speech.speech_seconds > 3.0
    assert not speech.steady


@pytest.mark.parametrize(
    "samples",
    [
        tone(4.0, 24000)[0],
        np.random.default_rng(0).uniform(-0.3, 0.3, 4 * 24000),  # white noise
        np.full(4 * 24000, 0.3),  # DC
        0.3
        * np.sin(
            2 * np.pi * (100 + 125 * np.arange(4 * 24000) / 24000) * np.arange(4 * 24000) / 24000
        ),  # a sweep
        0.3 * np.sign(np.sin(2 * np.pi * 150 * _T)),  # a buzz
    ],
    ids=["tone", "noise", "dc", "sweep", "square"],
)
def test_steady_signals_are_not_speech(samples: np.ndarray) -> None:
    pcm = PcmChunk.from_float(samples.astype(np.float32), 24000)
    clip = decode_clip(wav_file(pcm), 24000, max_seconds=35.0)
    assert clip.speech_seconds == pytest.approx(4.0, abs=0.05)  # loud: it passes -40 dBFS
    assert clip.steady
