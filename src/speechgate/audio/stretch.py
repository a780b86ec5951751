"""Pitch-preserving time stretch (ffmpeg's `atempo` through PyAV), streaming: for engines whose
own speed control is missing or not proportional, as OpenAI's `speed=2` halves the duration."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from fractions import Fraction

import av
import av.filter
import numpy as np

from speechgate.audio.pcm import PcmChunk

# One atempo instance accepts 0.5..100; slower factors are reached by chaining.
_ATEMPO_MIN = 0.5


def _atempo_factors(speed: float) -> list[float]:
    factors = []
    while speed < _ATEMPO_MIN:
        factors.append(_ATEMPO_MIN)
        speed /= _ATEMPO_MIN
    return [*factors, speed]


class TimeStretcher:
    """Changes tempo by `speed` without changing pitch: `process` chunks in order, then
    `flush` once."""

    def __init__(self, sample_rate: int, speed: float) -> None:
        self._rate = sample_rate
        self._graph = av.filter.Graph()
        node = self._graph.add_abuffer(
            format="s16", sample_rate=sample_rate, layout="mono", time_base=Fraction(1, sample_rate)
        )
        self._source = node
        for factor in _atempo_factors(speed):
            nxt = self._graph.add("atempo", f"{factor:.6f}")
            node.link_to(nxt)
            node = nxt
        sink = self._graph.add("abuffersink")
        node.link_to(sink)
        self._graph.configure()
        self._pts = 0

    def process(self, chunk: PcmChunk) -> Iterator[PcmChunk]:
        frame = av.AudioFrame.from_ndarray(
            chunk.samples.reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = self._rate
        frame.pts = self._pts
        self._pts += chunk.num_samples
        self._source.push(frame)
        yield from self._drain()

    def flush(self) -> Iterator[PcmChunk]:
        self._source.push(None)
        yield from self._drain()

    def _drain(self) -> Iterator[PcmChunk]:
        while True:
            try:
                frame = self._graph.pull()
            except (av.BlockingIOError, av.EOFError):
                return
            samples = frame.to_ndarray().reshape(-1).astype(np.int16, copy=False)
            if samples.size:
                yield PcmChunk(samples, self._rate)


def stretch(chunks: Iterator[PcmChunk], sample_rate: int, speed: float) -> Generator[PcmChunk]:
    """Apply `TimeStretcher` to a stream; a no-op at speed 1. Closing it closes `chunks`."""
    with contextlib.closing(chunks) if isinstance(chunks, Generator) else contextlib.nullcontext():
        if speed == 1.0:
            yield from chunks
            return
        stretcher = TimeStretcher(sample_rate, speed)
        for chunk in chunks:
            yield from stretcher.process(chunk)
        yield from stretcher.flush()
