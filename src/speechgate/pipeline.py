"""From a request to encoded audio: engine PCM -> resample -> encoder, chunk by chunk.

This runs where the engine runs: inside a worker process for the server (so encoding is
spread over the workers' cores, and the gateway only relays bytes), or in-process for
`speechgate say`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import BinaryIO

import numpy as np

from speechgate.audio.encoders import StreamEncoder
from speechgate.audio.fade import fade_edges
from speechgate.audio.formats import AudioFormat
from speechgate.audio.loudness import normalize_loudness
from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import Engine, SynthesisRequest
from speechgate.text.segment import segment


@dataclass(frozen=True)
class OutputSpec:
    """How the audio leaves the server."""

    format: AudioFormat
    sample_rate: int
    loudness_target: float | None = None
    """LUFS each segment is normalized toward (see `speechgate.audio.loudness`); None: off."""
    bit_rate: int | None = None
    """Bits per second of a compressed format; None: the encoder's default."""


@dataclass(frozen=True)
class EncodedChunk:
    """Encoded bytes plus the seconds of speech they complete (0 for a container's tail)."""

    data: bytes
    audio_seconds: float
    elapsed: float = 0.0
    """Seconds from the start of rendering to these bytes, where the engine runs: for the
    first chunk, the engine's own time to first audio, without any transport around it."""


# Between segments: the pause of a sentence end, which engines speaking one segment at a time
# no longer add themselves.
SEGMENT_PAUSE = 0.15


def speak_segments(
    engine: Engine, request: SynthesisRequest, loudness: float | None = None
) -> Generator[PcmChunk]:
    """The engine's PCM for `request`, segment by segment (see `speechgate.text.segment`).

    The first segment is short, so the first audio comes early; later ones are sentences, so a
    long input streams steadily and a cancelled job stops at the next segment at the latest.
    With a `loudness` target (LUFS), each segment is normalized toward it as a whole, so a
    segment's first audio waits for its last.
    """
    pause = PcmChunk.silence(SEGMENT_PAUSE, engine.sample_rate)
    for index, text in enumerate(segment(request.text)):
        if index:
            yield pause
        # Faded edges: the join with the pause is silent. Closing this closes the engine's.
        chunks = fade_edges(engine.synthesize(replace(request, text=text)))
        if loudness is None:
            yield from chunks
            continue
        with contextlib.closing(chunks):
            samples = [chunk.samples for chunk in chunks]
        if samples:
            whole = PcmChunk(np.concatenate(samples), engine.sample_rate)
            yield normalize_loudness(whole, loudness)


def render(
    engine: Engine, request: SynthesisRequest, output: OutputSpec, file: BinaryIO | None = None
) -> Generator[EncodedChunk]:
    """Synthesize and encode, yielding bytes as soon as the encoder releases them (into a
    seekable `file` instead, if given, with complete headers: see `StreamEncoder`).

    Closing the iterator early stops the engine at its next chunk.
    """
    started = time.perf_counter()
    encoder = StreamEncoder(
        output.format, engine.sample_rate, output.sample_rate, file, output.bit_rate
    )
    try:
        spoken = speak_segments(engine, request, output.loudness_target)
        with contextlib.closing(spoken) as pcm_chunks:
            for pcm in pcm_chunks:
                data = encoder.encode(pcm)
                yield EncodedChunk(data, pcm.duration, time.perf_counter() - started)
        yield EncodedChunk(encoder.finish(), 0.0, time.perf_counter() - started)
    finally:
        encoder.close()
