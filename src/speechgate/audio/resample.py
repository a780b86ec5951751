"""Streaming sample-rate conversion of PCM chunks (ffmpeg's swresample through PyAV).

For an engine whose voices differ in rate, as everything downstream takes its one `sample_rate`.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from fractions import Fraction

import av
import numpy as np

from speechgate.audio.pcm import PcmChunk


def resample(chunks: Iterable[PcmChunk], rate: int) -> Generator[PcmChunk]:
    """`chunks` at `rate`, chunk for chunk, through one resampler whose filter state spans
    chunk boundaries (no clicks)."""
    resampler: av.AudioResampler | None = None
    pts = 0
    for chunk in chunks:
        if chunk.sample_rate == rate and resampler is None:
            yield chunk
            continue
        if chunk.num_samples == 0:
            yield PcmChunk(chunk.samples, rate)
            continue
        if resampler is None:
            resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(chunk.samples).reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = chunk.sample_rate
        frame.time_base = Fraction(1, chunk.sample_rate)
        frame.pts = pts
        pts += chunk.num_samples
        yield _joined(resampler.resample(frame), rate)
    if resampler is not None:
        yield _joined(resampler.resample(None), rate)


def _joined(frames: list[av.AudioFrame], rate: int) -> PcmChunk:
    parts = [frame.to_ndarray().reshape(-1) for frame in frames]
    samples = np.concatenate(parts) if parts else np.zeros(0, np.int16)
    return PcmChunk(samples.astype(np.int16, copy=False), rate)
