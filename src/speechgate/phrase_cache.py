"""Rendered speech kept in memory, so a phrase said again ("One moment, please.") is answered
at once, with no worker and no place in the queue.

An entry is the engine's PCM (pauses and loudness included, before resampling and encoding),
keyed by everything that decides that audio; a hit is encoded into whatever format the request
asks for. The bytes of that encoding are kept too, as a `Rendition` of the phrase for that
output (format, rate, bit rate), so that a repeat in a format asked before runs no encoder at
all: its bytes go out as they are. The cache is bounded in bytes, PCM and renditions together:
the least recently used entries go first (PCM read from disk at start-up before any: it waits
under its digest for the first request with that key, `speechgate.phrase_store`), but pinned
ones (phrases pre-rendered at start-up) never do, and pinning stops once they would take the
whole bound. Renditions are never pinned: a pinned phrase can always be encoded again. Not
thread-safe: used from the gateway's event loop only.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass

import numpy as np

from speechgate.audio.encoders import StreamEncoder
from speechgate.audio.formats import AudioFormat
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


@dataclass(frozen=True)
class RenditionKey:
    """A phrase encoded for one output: what `OutputSpec` says of the bytes beyond the key's
    audio (its loudness target is the key's; word times are never cached)."""

    phrase: PhraseKey
    format: AudioFormat
    sample_rate: int
    bit_rate: int | None

    @classmethod
    def of(cls, phrase: PhraseKey, output: OutputSpec) -> RenditionKey:
        return cls(phrase, output.format, output.sample_rate, output.bit_rate)


@dataclass(frozen=True)
class Rendition:
    """A phrase's encoded bytes, in the chunks the encoder gave them (a short one first), with
    the seconds of audio each completes."""

    chunks: tuple[EncodedChunk, ...]

    @property
    def size(self) -> int:
        return sum(len(chunk.data) for chunk in self.chunks)

    @classmethod
    def of(cls, chunks: list[EncodedChunk]) -> Rendition:
        """The bytes and seconds of `chunks`, without what else they carry; a chunk with no
        bytes (an encoder's buffering) has its seconds counted with the next that has some."""
        kept: list[EncodedChunk] = []
        seconds = 0.0
        for chunk in chunks:
            seconds += chunk.audio_seconds
            if chunk.data:
                kept.append(EncodedChunk(chunk.data, seconds))
                seconds = 0.0
        if seconds and kept:
            last = kept.pop()
            kept.append(EncodedChunk(last.data, last.audio_seconds + seconds))
        return cls(tuple(kept))

    async def replay(self) -> AsyncGenerator[EncodedChunk]:
        for chunk in self.chunks:
            yield chunk


_Key = PhraseKey | RenditionKey | str  # a str: the digest of PCM read from disk


@dataclass
class _Entry:
    value: PcmChunk | Rendition
    pinned: bool

    @property
    def size(self) -> int:
        if isinstance(self.value, Rendition):
            return self.value.size
        return int(self.value.samples.nbytes)


class PhraseCache:
    """Rendered PCM by `PhraseKey`, and its renditions by `RenditionKey`, within `max_bytes`
    (0: caches nothing)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[_Key, _Entry] = OrderedDict()
        self.size = 0  # bytes of PCM and renditions held
        self.pinned_size = 0
        self.stored = 0
        """How many entries read from disk still wait for their key (`take_stored`)."""

    def __len__(self) -> int:
        """How many phrases (PCM entries) are held, renditions aside."""
        return sum(not isinstance(key, RenditionKey) for key in self._entries)

    def get(self, key: PhraseKey) -> PcmChunk | None:
        value = self._get(key)
        return value if isinstance(value, PcmChunk) else None

    def rendition(self, key: PhraseKey, output: OutputSpec) -> Rendition | None:
        """The bytes of `key`'s phrase encoded as `output` asks, if kept."""
        value = self._get(RenditionKey.of(key, output))
        return value if isinstance(value, Rendition) else None

    def put(self, key: PhraseKey, pcm: PcmChunk, pinned: bool = False) -> bool:
        """Keep `pcm` for `key`, evicting the least recently used unpinned entries to make room;
        False if it is not kept (larger than the room pinned entries leave)."""
        return self._put(key, _Entry(pcm, pinned))

    def put_rendition(self, key: PhraseKey, output: OutputSpec, rendition: Rendition) -> bool:
        """Keep `rendition`, `key`'s phrase encoded as `output` asks, as `put` keeps PCM."""
        return self._put(RenditionKey.of(key, output), _Entry(rendition, pinned=False))

    def put_stored(self, digest: str, pcm: PcmChunk) -> bool:
        """Keep `pcm`, read from disk, under its `phrase_store.digest` until `take_stored`."""
        kept = self._put(digest, _Entry(pcm, pinned=False))
        self.stored += kept
        return kept

    def take_stored(self, digest: str, key: PhraseKey) -> PcmChunk | None:
        """The PCM read from disk under `digest`, kept from now on under `key` (whose digest
        it is), if it is still held."""
        entry = self._entries.get(digest)
        if entry is None or not isinstance(entry.value, PcmChunk):
            return None
        self._remove(digest)
        self._put(key, entry)
        return entry.value

    def _get(self, key: _Key) -> PcmChunk | Rendition | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry.value

    def _put(self, key: _Key, entry: _Entry) -> bool:
        pinned = entry.pinned
        room = self.max_bytes - self.pinned_size
        if entry.size > room:
            return False
        self._remove(key)
        # The oldest unpinned entries that make room, found without a pass over the rest.
        short = self.size + entry.size - self.max_bytes
        victims = []
        for old, held in self._entries.items():
            if short <= 0:
                break
            if not held.pinned:
                victims.append(old)
                short -= held.size
        for old in victims:
            self._remove(old)
        self._entries[key] = entry
        self.size += entry.size
        if pinned:
            self.pinned_size += entry.size
        return True

    def forget_voice(self, voice_id: str) -> int:
        """Drop every entry spoken with `voice_id` (a stored voice deleted or replaced);
        returns how many."""
        gone = [key for key in self._entries if voice_id in _voices(key)]
        for key in gone:
            self._remove(key)
        return len(gone)

    def _remove(self, key: _Key) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.stored -= isinstance(key, str)
            self.size -= entry.size
            if entry.pinned:
                self.pinned_size -= entry.size


def _voices(key: _Key) -> tuple[str, ...]:
    if isinstance(key, str):  # read from disk: a voice deleted since is never asked for again
        return ()
    phrase = key if isinstance(key, PhraseKey) else key.phrase
    return phrase.voice_id, phrase.voice


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
