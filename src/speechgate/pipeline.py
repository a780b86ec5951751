"""From a request to encoded audio: engine PCM -> resample -> encoder, chunk by chunk.

This runs where the engine runs: inside a worker process for the server (so encoding is
spread over the workers' cores, and the gateway only relays bytes), or in-process for
`speechgate say`.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from speechgate.audio.encoders import StreamEncoder
from speechgate.audio.formats import AudioFormat
from speechgate.engines.base import Engine, SynthesisRequest


@dataclass(frozen=True)
class OutputSpec:
    """How the audio leaves the server."""

    format: AudioFormat
    sample_rate: int


@dataclass(frozen=True)
class EncodedChunk:
    """Encoded bytes plus the seconds of speech they complete (0 for a container's tail)."""

    data: bytes
    audio_seconds: float


def render(
    engine: Engine, request: SynthesisRequest, output: OutputSpec
) -> Generator[EncodedChunk]:
    """Synthesize and encode, yielding bytes as soon as the encoder releases them.

    Closing the iterator early stops the engine at its next chunk.
    """
    encoder = StreamEncoder(output.format, engine.sample_rate, output.sample_rate)
    pcm_chunks = engine.synthesize(request)
    try:
        for pcm in pcm_chunks:
            yield EncodedChunk(encoder.encode(pcm), pcm.duration)
        yield EncodedChunk(encoder.finish(), 0.0)
    finally:
        close = getattr(pcm_chunks, "close", None)
        if close is not None:
            close()
        encoder.close()
