"""Short fades at the edges of a stream of PCM chunks.

A segment that starts or stops on a non-zero sample is heard as a click against the silence
between segments; a few milliseconds of ramp remove it.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable

import numpy as np

from speechgate.audio.pcm import PcmChunk

FADE_SECONDS = 0.005


def _ramp(chunk: PcmChunk, seconds: float, rising: bool) -> PcmChunk:
    length = min(round(seconds * chunk.sample_rate), chunk.num_samples)
    if length == 0:
        return chunk
    ramp = np.linspace(0.0, 1.0, length, endpoint=False, dtype=np.float32)
    samples = chunk.samples.astype(np.float32)
    if rising:
        samples[:length] *= ramp
    else:
        samples[-length:] *= ramp[::-1]
    return PcmChunk(np.round(samples).astype(np.int16), chunk.sample_rate)


def fade_edges(chunks: Iterable[PcmChunk], seconds: float = FADE_SECONDS) -> Generator[PcmChunk]:
    """The same audio, faded in and out. Each chunk passes on at once but for its last
    `seconds`, held for a fade out, so the first audio is not a chunk late. Closing this
    closes `chunks`."""
    iterator = iter(chunks)
    tail: PcmChunk | None = None  # not yet passed on
    try:
        for chunk in iterator:
            if not chunk.num_samples:
                continue
            if tail is None:
                chunk = _ramp(chunk, seconds, rising=True)
            elif tail.num_samples:
                chunk = PcmChunk(np.concatenate([tail.samples, chunk.samples]), chunk.sample_rate)
            keep = min(round(seconds * chunk.sample_rate), chunk.num_samples)
            head = chunk.num_samples - keep
            tail = PcmChunk(chunk.samples[head:], chunk.sample_rate)
            if head:
                yield PcmChunk(chunk.samples[:head], chunk.sample_rate)
        if tail is not None:
            yield _ramp(tail, seconds, rising=False)
    finally:
        if isinstance(iterator, Generator):
            iterator.close()
