"""Short fades at the edges of a stream of PCM chunks.

A segment that starts or stops on a non-zero sample puts a step into the joined audio (the
pause between segments is silence), and a step is heard as a click. A few milliseconds of
ramp remove it without touching the speech.
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
    """The same chunks, the first faded in and the last faded out.

    The last chunk is only known when the next one fails to come, so each chunk is passed on
    when its successor arrives (or the stream ends): a lag of one chunk. Closing this closes
    `chunks`.
    """
    iterator = iter(chunks)
    held: PcmChunk | None = None
    try:
        for chunk in iterator:
            if held is None:
                held = _ramp(chunk, seconds, rising=True)
                continue
            yield held
            held = chunk
        if held is not None:
            yield _ramp(held, seconds, rising=False)
    finally:
        if isinstance(iterator, Generator):
            iterator.close()
