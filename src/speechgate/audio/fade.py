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
    """The same audio, faded in at its start and out at its end.

    Each chunk is passed on as soon as it arrives but for its last `seconds`, which the fade
    out would need if no chunk followed: those go out at the head of the next chunk (or, faded,
    at the end). So the first audio leaves as soon as the engine has made it, not one chunk
    later. Closing this closes `chunks`.
    """
    iterator = iter(chunks)
    tail: PcmChunk | None = None  # the end of the audio so far, not yet passed on
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
