"""The PCM value that flows from engines through workers to encoders."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Samples = npt.NDArray[np.int16]


@dataclass(frozen=True)
class PcmChunk:
    """A block of mono 16-bit PCM; `samples` is never mutated, so chunks are shared freely."""

    samples: Samples
    sample_rate: int

    @classmethod
    def from_float(cls, audio: npt.NDArray[np.floating], sample_rate: int) -> PcmChunk:
        """Build a chunk from float audio in [-1, 1], clipping the rest."""
        clipped = np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
        return cls(np.round(clipped * 32767.0).astype(np.int16), sample_rate)

    @classmethod
    def silence(cls, seconds: float, sample_rate: int) -> PcmChunk:
        return cls(np.zeros(round(seconds * sample_rate), np.int16), sample_rate)

    @property
    def num_samples(self) -> int:
        return int(self.samples.shape[0])

    @property
    def duration(self) -> float:
        return self.num_samples / self.sample_rate

    def to_bytes(self) -> bytes:
        """Little-endian s16 bytes, the wire form of `pcm` output."""
        return self.samples.astype("<i2", copy=False).tobytes()
