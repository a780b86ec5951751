"""Speaking text while it is still being written: one streaming session.

Text arrives in pieces of any size (an LLM's tokens, even single characters). Each segment is
spoken as soon as it is complete, in order, and all of them are encoded into one continuous
audio stream. Every segment is a job of its own through admission, so a session holds a worker
only while it has something to say. A sentence whose end waits only on the next word ("fine."
before "This" or "and") is synthesized ahead while that word is written; the audio is sent if
the word starts a new sentence, and the job is cancelled if it goes on with this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from speechgate.audio.encoders import StreamEncoder
from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk
from speechgate.errors import InvalidRequest
from speechgate.pipeline import EncodedChunk, OutputSpec, segment_pause
from speechgate.service import SpeechPlan, SpeechService
from speechgate.text.segment import Segmenter, clean_text, continues_sentence
from speechgate.timing import WordTime


@dataclass(frozen=True)
class SegmentStarted:
    """Audio for `text` follows; it starts `audio_start` seconds into the stream."""

    index: int
    text: str
    audio_start: float


@dataclass(frozen=True)
class SegmentWords:
    """Words of segment `index` whose audio follows (with `OutputSpec.word_times`): characters
    of all the text the session was sent (see `SpeechSession.recent_text`), seconds of its
    decoded stream."""

    index: int
    words: tuple[WordTime, ...]


@dataclass(frozen=True)
class SegmentDone:
    index: int
    audio_start: float
    audio_end: float


SessionOutput = SegmentStarted | SegmentWords | SegmentDone | bytes

MAX_PENDING_CHARS = 65536
"""Text a session holds unspoken at most, by default."""


@dataclass
class _Segment:
    """A segment to speak, `offset` characters into all the text. A guess (`decided` set) is
    text that is a segment if the next word starts a sentence: its job starts at once and its
    audio waits for the word, which `decided` gets."""

    text: str
    offset: int
    decided: asyncio.Future[bool] | None = None
    decided_at: float = 0.0  # perf_counter when `decided` got its verdict

    @property
    def dropped(self) -> bool:
        decided = self.decided
        return decided is not None and decided.done() and not decided.result()

    def decide(self, right: bool) -> None:
        if self.decided is not None and not self.decided.done():
            self.decided.set_result(right)
            self.decided_at = time.perf_counter()


class SpeechSession:
    """Use from one event loop: one task feeds text (`add_text`, `flush`, `finish`), another
    iterates `speak()`.

    Feeding never waits, so the feeder can always be reading its client (and notice it
    leave); text not yet spoken is capped at `max_pending_chars` instead. Audio has real
    backpressure: `speak()` produces only as fast as it is consumed, and the worker pauses."""

    def __init__(
        self,
        service: SpeechService,
        plan: SpeechPlan,
        max_pending_chars: int = MAX_PENDING_CHARS,
        before_segment: Callable[[int], Awaitable[None]] | None = None,
        sender: Hashable = None,
    ) -> None:
        """`before_segment(characters)` runs before a segment is synthesized with the characters
        it adds to those counted so far (a wrong guess's count the next segment's); what it
        raises ends the session (a key's quota running out, say). `sender`: whom the pools'
        admission shares the workers fairly between (`Caller.share`)."""
        self._service = service
        self._pool = service.pool(plan.engine)
        self._plan = plan
        self._segmenter = Segmenter(service.segment_limits(plan.engine))
        self._pending: asyncio.Queue[_Segment | None] = asyncio.Queue()
        self._guess: _Segment | None = None  # queued, waiting for the next word
        # The client's text as it sent it (what word offsets count in) and as the segmenter
        # sees it (control characters made spaces, one for one, so offsets are the same), both
        # from character `_base` on: the start of the segment being spoken. What is before is
        # spoken and forgotten, so a session of any length holds about `max_pending_chars`.
        self._text = ""
        self._cleaned = ""
        self._base = 0
        self._found = 0  # where the last segment found ends, in all the text
        self._pending_chars = 0
        self._reserved = 0  # characters `before_segment` was called for
        self._spoken = 0  # characters of the segments spoken (or being spoken)
        self._max_pending_chars = max_pending_chars
        # Workers send raw PCM at the engine's rate; one encoder here keeps the container
        # continuous across segments (one MP3 stream, one Ogg stream...).
        self._raw = OutputSpec(
            AudioFormat.PCM,
            plan.engine_rate,
            plan.output.loudness_target,
            word_times=plan.output.word_times,
        )
        self._encoder = StreamEncoder(
            plan.output.format,
            plan.engine_rate,
            plan.output.sample_rate,
            bit_rate=plan.output.bit_rate,
        )
        self._before_segment = before_segment
        self._sender = sender
        self.characters = 0
        self.audio_seconds = 0.0
        self.completed = False
        self.time_to_first_audio: float | None = None  # of the first segment, once it speaks

    @property
    def plan(self) -> SpeechPlan:
        """What the session speaks with: its engine, voice and output."""
        return self._plan

    def add_text(self, delta: str) -> None:
        """Raises InvalidRequest when more than `max_pending_chars` would wait to be spoken;
        the refused `delta` is then dropped, neither pending nor counted."""
        if self._pending_chars + len(delta) > self._max_pending_chars:
            raise InvalidRequest(
                f"More than {self._max_pending_chars} characters are waiting to be spoken; "
                "send text no faster than the audio is read.",
                param="delta",
                code="too_much_pending_text",
            )
        self.characters += len(delta)
        self._pending_chars += len(delta)
        self._text += delta
        self._cleaned += clean_text(delta)
        self._queue(self._segmenter.feed(delta))

    def flush(self) -> None:
        """Speak what has been written so far, even mid-sentence."""
        self._queue(self._segmenter.flush())

    def _queue(self, segments: Iterable[str]) -> None:
        for text in segments:
            segment = self._find(text)
            self._found = segment.offset + len(text)
            guess, self._guess = self._guess, None
            if guess is not None:
                right = (guess.text, guess.offset) == (segment.text, segment.offset)
                guess.decide(right)
                if right:
                    continue
            self._pending.put_nowait(segment)
        # The word that would complete a sentence is still being written: speak the sentence
        # ahead, in case it does (saving an LLM's token of waiting before the first audio).
        tentative = self._segmenter.tentative()
        if self._guess is not None and self._guess.text != tentative:
            self._guess.decide(False)
            self._guess = None
        if self._guess is None and tentative:
            self._guess = replace(self._find(tentative), decided=asyncio.Future())
            self._pending.put_nowait(self._guess)

    def _find(self, text: str) -> _Segment:
        # A segment is a stripped slice of the cleaned text, after the one before it (which a
        # guess being spoken may have forgotten already, up to the guess's own start).
        after = max(0, self._found - self._base)
        return _Segment(text, self._base + self._cleaned.find(text, after))

    def finish(self) -> None:
        """No more text: speak the rest, then end the stream."""
        self.flush()
        self._pending.put_nowait(None)

    async def speak(self) -> AsyncGenerator[SessionOutput]:
        """Alignment events and encoded audio, in order. Leaving early cancels the segment
        being synthesized inside its worker."""
        pause = segment_pause(self._plan.request.speed, self._plan.engine_rate)
        try:
            request = await self._service.prepare(self._plan)
            index = 0
            previous = ""
            while (segment := await self._pending.get()) is not None:
                if segment.dropped:
                    continue
                text, offset = segment.text, segment.offset
                self._forget_before(offset)
                await self._reserve(len(text))
                asked = time.perf_counter()
                chunks = self._pool.synthesize(
                    replace(request, text=text), self._raw, sender=self._sender
                )
                try:
                    first = await _ahead(chunks, segment.decided)
                    if first is None:
                        continue  # a wrong guess: the next word went on with the sentence
                    # A guess's text became a segment when its next word came: the time to its
                    # first audio counts from then, not the client's wait for that word.
                    asked = max(asked, segment.decided_at)
                    self._spoken += len(text)
                    self._pending_chars -= len(text)
                    # Within a sentence (cut at a clause) the engine spoke the pause itself.
                    joined = index > 0 and continues_sentence(previous, text)
                    if index and not joined and (silence := self._encode(pause)):
                        yield silence
                    previous = text
                    # Times in the decoded stream, which begins with the codec's priming.
                    start = self.audio_seconds + self._encoder.priming
                    yield SegmentStarted(index, text, start)
                    async for chunk in _chain(first, chunks):
                        if self.time_to_first_audio is None:
                            self.time_to_first_audio = time.perf_counter() - asked
                        if chunk.words:
                            # Before the audio holding them, as an SSE stream sends them.
                            words = tuple(word.shifted(start, offset) for word in chunk.words)
                            yield SegmentWords(index, words)
                        samples = np.frombuffer(chunk.data, dtype="<i2").astype(np.int16)
                        if data := self._encode(PcmChunk(samples, self._plan.engine_rate)):
                            yield data
                finally:
                    await chunks.aclose()
                yield SegmentDone(index, start, self.audio_seconds + self._encoder.priming)
                index += 1
            if tail := self._encoder.finish():
                yield tail
            self.completed = True
        finally:
            self._encoder.close()

    async def audio(self) -> AsyncGenerator[bytes]:
        """`speak()`'s encoded audio alone, for a client that takes no events."""
        async with contextlib.aclosing(self.speak()) as spoken:
            async for item in spoken:
                if isinstance(item, bytes):
                    yield item

    @property
    def recent_text(self) -> tuple[str, int]:
        """The client's text from character `base` on, and `base`: every word still to come
        (in `SegmentWords`) is in it."""
        return self._text, self._base

    async def _reserve(self, characters: int) -> None:
        """Count a segment about to be synthesized: past what is spoken, what a wrong guess
        counted already is not counted again."""
        more = self._spoken + characters - self._reserved
        if more > 0 and self._before_segment is not None:
            await self._before_segment(more)
        self._reserved = max(self._reserved, self._spoken + characters)

    def _forget_before(self, offset: int) -> None:
        cut = offset - self._base
        self._text, self._cleaned = self._text[cut:], self._cleaned[cut:]
        self._base = offset

    def _encode(self, pcm: PcmChunk) -> bytes:
        self.audio_seconds += pcm.duration
        return self._encoder.encode(pcm)


async def _ahead(
    chunks: AsyncGenerator[EncodedChunk], decided: asyncio.Future[bool] | None
) -> list[EncodedChunk] | None:
    """Start the job behind `chunks`; for a guess, wait for its verdict while the job runs.
    The chunks read so far (the first, or none for a job that ended silent), or None for a
    wrong guess, whose job is cancelled."""
    if decided is None:
        chunk = await anext(chunks, None)
        return [] if chunk is None else [chunk]
    first = asyncio.ensure_future(anext(chunks, None))
    right = False
    try:
        right = await decided
    finally:
        if not right:
            first.cancel()
            await asyncio.wait([first])  # the job's cancel runs before `chunks` is closed
            if not first.cancelled():
                first.exception()  # a refusal of text that was no segment is no error
    if not right:
        return None
    chunk = await first
    return [] if chunk is None else [chunk]


async def _chain(
    first: list[EncodedChunk], rest: AsyncGenerator[EncodedChunk]
) -> AsyncGenerator[EncodedChunk]:
    for chunk in first:
        yield chunk
    async for chunk in rest:
        yield chunk
