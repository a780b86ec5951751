"""Decode response bodies back to samples, so tests can check the audio itself."""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np
import numpy.typing as npt

# ffmpeg's demuxer for each `response_format`; naming it, rather than letting ffmpeg probe,
# also checks that a body is in the container its format promises.
_DEMUXERS = {"mp3": "mp3", "opus": "ogg", "aac": "aac", "flac": "flac", "wav": "wav"}


@dataclass(frozen=True)
class DecodedAudio:
    """Mono float32 samples in [-1, 1] (s16 input maps exactly: x / 32768) and their rate.

    Ogg Opus always decodes at 48000 Hz, whatever rate it was encoded at: that is the rate of
    Opus itself, and ffmpeg does not resample to the header's "input sample rate".
    """

    samples: npt.NDArray[np.float32]
    sample_rate: int

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sample_rate

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(np.square(self.samples)))) if len(self.samples) else 0.0

    def to_int16(self) -> npt.NDArray[np.int16]:
        """The samples as s16 again: exact for audio that was s16 all along."""
        return np.round(self.samples * 32768.0).astype(np.int16)


def decode_audio(data: bytes, fmt: str, pcm_rate: int = 24000) -> DecodedAudio:
    """Decode a whole body of `fmt` ("mp3", "opus", ..., "pcm"; raw pcm is taken at `pcm_rate`)."""
    if fmt == "pcm":
        samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
        return DecodedAudio(samples, pcm_rate)
    with av.open(io.BytesIO(data), mode="r", format=_DEMUXERS[fmt]) as container:
        stream = container.streams.audio[0]
        # Convert whatever the decoder yields (fltp, s16, s32p...) to packed float mono,
        # keeping the decoded rate.
        resampler = av.AudioResampler(format="flt", layout="mono")
        frames = [out for frame in container.decode(stream) for out in resampler.resample(frame)]
        frames += resampler.resample(None)
        sample_rate = frames[0].sample_rate if frames else stream.sample_rate
    parts = [frame.to_ndarray().reshape(-1) for frame in frames]
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    return DecodedAudio(samples.astype(np.float32, copy=False), sample_rate)


def flac_total_samples(data: bytes) -> int:
    """The sample count a FLAC file's STREAMINFO declares (0: unknown, as in a stream)."""
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # STREAMINFO is the first block
    # After min/max block size (2+2) and min/max frame size (3+3): 20 bits of sample rate,
    # 3 of channels, 5 of bits per sample, then 36 bits of total samples.
    packed = int.from_bytes(data[18:26], "big")
    return packed & ((1 << 36) - 1)
