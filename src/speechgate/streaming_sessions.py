"""Speaking text while it is still being written: one streaming session.

Text arrives in pieces of any size (an LLM's tokens, even single characters). Each segment is
spoken as soon as it is complete, in order, and all of them are encoded into one continuous
audio stream. Every segment is a job of its own through admission, so a session holds a worker
only while it has something to say, never while it waits for text.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from speechgate.audio.encoders import StreamEncoder
from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk
from speechgate.errors import InvalidRequest
from speechgate.pipeline import OutputSpec, segment_pause
from speechgate.service import SpeechPlan, SpeechService
from speechgate.text.segment import Segmenter, clean_text
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
        before_segment: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        """`before_segment(text)` runs before each segment is synthesized; what it raises ends
        the session (a key's quota running out, say)."""
        self._service = service
        self._pool = service.pool(plan.engine)
        self._plan = plan
        self._segmenter = Segmenter()
        # Each segment and where it starts in all the text the client has sent.
        self._pending: asyncio.Queue[tuple[str, int] | None] = asyncio.Queue()
        # The client's text as it sent it (what word offsets count in) and as the segmenter
        # sees it (control characters made spaces, one for one, so offsets are the same), both
        # from character `_base` on: the start of the segment being spoken. What is before is
        # spoken and forgotten, so a session of any length holds about `max_pending_chars`.
        self._text = ""
        self._cleaned = ""
        self._base = 0
        self._found = 0  # where the last segment found ends, in all the text
        self._pending_chars = 0
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
        self.characters = 0
        self.audio_seconds = 0.0
        self.completed = False
        self.time_to_first_audio: float | None = None  # of the first segment, once it speaks

    def add_text(self, delta: str) -> None:
        """Raises InvalidRequest when more than `max_pending_chars` wait to be spoken."""
        self.characters += len(delta)
        self._pending_chars += len(delta)
        if self._pending_chars > self._max_pending_chars:
            raise InvalidRequest(
                f"More than {self._max_pending_chars} characters are waiting to be spoken; "
                "send text no faster than the audio is read.",
                param="delta",
                code="too_much_pending_text",
            )
        self._text += delta
        self._cleaned += clean_text(delta)
        self._queue(self._segmenter.feed(delta))

    def flush(self) -> None:
        """Speak what has been written so far, even mid-sentence."""
        self._queue(self._segmenter.flush())

    def _queue(self, segments: Iterable[str]) -> None:
        for segment in segments:
            # A segment is a stripped slice of the cleaned text, after the one before it.
            start = self._base + self._cleaned.find(segment, self._found - self._base)
            self._found = start + len(segment)
            self._pending.put_nowait((segment, start))

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
            while (pending := await self._pending.get()) is not None:
                text, offset = pending
                self._pending_chars -= len(text)
                self._forget_before(offset)
                if index and (silence := self._encode(pause)):
                    yield silence
                if self._before_segment is not None:
                    await self._before_segment(text)
                # Times in the decoded stream, which begins with the codec's priming.
                start = self.audio_seconds + self._encoder.priming
                yield SegmentStarted(index, text, start)
                asked = time.perf_counter()
                chunks = self._pool.synthesize(replace(request, text=text), self._raw)
                try:
                    async for chunk in chunks:
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

    def _forget_before(self, offset: int) -> None:
        cut = offset - self._base
        self._text, self._cleaned = self._text[cut:], self._cleaned[cut:]
        self._base = offset

    def _encode(self, pcm: PcmChunk) -> bytes:
        self.audio_seconds += pcm.duration
        return self._encoder.encode(pcm)
