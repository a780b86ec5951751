"""Rendered speech kept in memory, so a phrase said again ("One moment, please.") is answered
at once, with no worker and no place in the queue.

An entry is the engine's PCM (pauses and loudness included, before resampling and encoding),
keyed by everything that decides that audio; a hit is encoded into whatever format the request
asks for. The cache is bounded in bytes of PCM: the least recently used entries go first, but
pinned ones (phrases pre-rendered at start-up) never do, and pinning stops once they would take
the whole bound. Not thread-safe: used from the gateway's event loop only.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass

import numpy as np

from speechgate.audio.encoders import StreamEncoder
from speechgate.audio.pcm import PcmChunk
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.text.prepare import TextOptions

# The first encoded chunk of a hit: short, so its bytes leave before the rest is encoded.
_FIRST_SECONDS = 0.25
_CHUNK_SECONDS = 2.0


@dataclass(frozen=True)
class PhraseKey:
    """What decides a request's audio: the text as sent, with the options it is prepared by.
    `voice` is the engine's voice (a stored voice's state file: unique to it), `voice_id` the
    voice as clients name it and `owner` the key that may use it, so that one key's clone is
    never another's hit."""

    engine: str
    voice: str
    voice_id: str
    owner: str | None
    text: str
    speed: float
    seed: int | None
    instructions: str | None
    loudness_target: float | None
    engine_options: tuple[tuple[str, str], ...] = ()
    text_options: TextOptions | None = None


@dataclass
class _Entry:
    pcm: PcmChunk
    pinned: bool

    @property
    def size(self) -> int:
        return int(self.pcm.samples.nbytes)


class PhraseCache:
    """Rendered PCM by `PhraseKey`, within `max_bytes` (0: caches nothing)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[PhraseKey, _Entry] = OrderedDict()
        self.size = 0  # bytes of PCM held
        self.pinned_size = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: PhraseKey) -> PcmChunk | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry.pcm

    def put(self, key: PhraseKey, pcm: PcmChunk, pinned: bool = False) -> bool:
        """Keep `pcm` for `key`, evicting the least recently used unpinned entries to make room;
        False if it is not kept (larger than the room pinned entries leave)."""
        entry = _Entry(pcm, pinned)
        room = self.max_bytes - self.pinned_size
        if entry.size > room:
            return False
        self._remove(key)
        for old in [k for k, e in self._entries.items() if not e.pinned]:
            if self.size + entry.size <= self.max_bytes:
                break
            self._remove(old)
        self._entries[key] = entry
        self.size += entry.size
        if pinned:
            self.pinned_size += entry.size
        return True

    def forget_voice(self, voice_id: str) -> int:
        """Drop every entry spoken with `voice_id` (a stored voice deleted or replaced);
        returns how many."""
        gone = [key for key in self._entries if voice_id in (key.voice_id, key.voice)]
        for key in gone:
            self._remove(key)
        return len(gone)

    def _remove(self, key: PhraseKey) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.size -= entry.size
            if entry.pinned:
                self.pinned_size -= entry.size


def options_key(options: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((options or {}).items()))


async def encode_cached(pcm: PcmChunk, output: OutputSpec) -> AsyncGenerator[EncodedChunk]:
    """`pcm` encoded as `output` asks, a short first chunk first, then the rest."""
    encoder = StreamEncoder(
        output.format, pcm.sample_rate, output.sample_rate, None, output.bit_rate
    )
    try:
        first = round(_FIRST_SECONDS * pcm.sample_rate)
        step = round(_CHUNK_SECONDS * pcm.sample_rate)
        bounds = [0, *range(first, pcm.num_samples, step), pcm.num_samples]
        for start, end in itertools.pairwise(bounds):
            if end > start:
                piece = PcmChunk(pcm.samples[start:end], pcm.sample_rate)
                yield EncodedChunk(encoder.encode(piece), piece.duration)
        yield EncodedChunk(encoder.finish(), 0.0)
    finally:
        encoder.close()


def joined(pieces: list[bytes], sample_rate: int) -> PcmChunk:
    """The PCM of a rendered request from its chunks' `EncodedChunk.pcm` bytes."""
    return PcmChunk(np.frombuffer(b"".join(pieces), dtype=np.int16).copy(), sample_rate)
