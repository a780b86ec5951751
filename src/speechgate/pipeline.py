"""From a request to encoded audio: engine PCM -> resample -> encoder, chunk by chunk.

This runs where the engine runs (a worker process, or in-process for `speechgate say`), so
encoding is spread over the workers' cores and the gateway only relays bytes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import BinaryIO

import numpy as np

from speechgate.audio.encoders import StreamEncoder
from speechgate.audio.fade import fade_edges
from speechgate.audio.formats import AudioFormat
from speechgate.audio.loudness import normalize_loudness
from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import Engine, SynthesisRequest, WordTimer
from speechgate.lanes import Lanes
from speechgate.text.prepare import Silence, Speech, prepare
from speechgate.text.rewrite import Rewrite
from speechgate.text.segment import (
    SegmentLimits,
    clean_text,
    continues_sentence,
    mask_abbreviation_periods,
    offsets,
    segment,
)
from speechgate.timing import SourceWords, TimedChunk, WordTime, carry_words, estimate_words


@dataclass(frozen=True)
class OutputSpec:
    """How the audio leaves the server."""

    format: AudioFormat
    sample_rate: int
    loudness_target: float | None = None
    """LUFS each segment is normalized toward; None: off."""
    bit_rate: int | None = None
    word_times: bool = False
    keep_pcm: bool = False
    """For the phrase cache, which encodes a request's audio again in any format."""


@dataclass(frozen=True)
class EncodedChunk:
    """Encoded bytes plus the seconds of speech they complete (0 for a container's tail)."""

    data: bytes
    audio_seconds: float
    elapsed: float = 0.0
    """Seconds from the start of rendering, where the engine runs, without any transport."""
    encoding: float = 0.0
    words: tuple[WordTime, ...] = ()
    """With `OutputSpec.word_times`: the words first known with these bytes."""
    pcm: bytes = b""
    """With `OutputSpec.keep_pcm`: the engine's PCM these bytes encode."""
    between_segments: bool = False
    """The pause between two segments, when the engine holds nothing of this request: the only
    point where a worker turns to another job."""


# A sentence end's pause at speed 1, which engines given one segment at a time do not add.
SEGMENT_PAUSE = 0.15


def segment_pause(speed: float, sample_rate: int) -> PcmChunk:
    return PcmChunk.silence(SEGMENT_PAUSE / speed, sample_rate)


class _Pause(TimedChunk):
    """The pause between segments, told apart so `render` can mark it `between_segments`."""


def speak_segments(
    engine: Engine,
    request: SynthesisRequest,
    loudness: float | None = None,
    limits: SegmentLimits | None = None,
) -> Generator[PcmChunk]:
    """The engine's PCM for `request`, segment by segment: a short first one for early audio,
    then sentences. A `loudness` target normalizes each segment whole, so its first audio waits
    for its last."""
    spoken = _segments(engine, request, loudness, timed=False, limits=limits)
    with contextlib.closing(spoken):
        for chunk in spoken:
            yield chunk.pcm


def speak_timed(
    engine: Engine,
    request: SynthesisRequest,
    loudness: float | None = None,
    limits: SegmentLimits | None = None,
) -> Generator[TimedChunk]:
    """`speak_segments` with word times in the client's characters. For an engine that is not
    a `WordTimer` they are estimated, and each segment's audio is held until it is whole."""
    return _segments(engine, request, loudness, timed=True, limits=limits)


@dataclass(frozen=True)
class _Part:
    """One segment for the engine, at `start` of `rewrite.spoken`, after `pause` seconds of
    silence. Next to a requested break the engine's own silence is cut, so the break is as
    long as asked."""

    request: SynthesisRequest
    rewrite: Rewrite
    start: int
    pause: float
    break_before: bool = False
    break_after: bool = False
    joined: bool = False  # cut at a clause: no pause of its own


def _parts(
    request: SynthesisRequest, sample_rate: int, limits: SegmentLimits | None = None
) -> tuple[list[_Part], float]:
    """The request's segments, and the seconds of silence after the last (an SSML break)."""
    text = clean_text(request.text)
    options = request.text_options
    blocks = prepare(text, options) if options is not None else (Speech(Rewrite.identity(text)),)
    parts: list[_Part] = []
    silence: float | None = None
    for block in blocks:
        if isinstance(block, Silence):
            silence = (silence or 0.0) + block.seconds
            if parts:
                parts[-1] = replace(parts[-1], break_after=True)
            continue
        spoken = block.rewrite.spoken
        texts = segment(spoken, None if parts else limits)
        previous = ""
        for piece, start in zip(texts, offsets(spoken, texts), strict=True):
            said = replace(
                request,
                text=mask_abbreviation_periods(piece),
                speed=request.speed * block.speed,
                text_options=None,
            )
            if silence is None:
                joined = bool(previous) and continues_sentence(previous, piece)
                pause = segment_pause(request.speed, sample_rate).duration if parts else 0.0
                parts.append(
                    _Part(said, block.rewrite, start, 0.0 if joined else pause, joined=joined)
                )
            else:
                parts.append(_Part(said, block.rewrite, start, silence, break_before=True))
            silence = None
            previous = piece
    return parts, silence or 0.0


def _segments(
    engine: Engine,
    request: SynthesisRequest,
    loudness: float | None,
    timed: bool,
    lanes: Lanes | None = None,
    limits: SegmentLimits | None = None,
) -> Generator[TimedChunk]:
    elapsed = 0.0
    parts, tail = _parts(request, engine.sample_rate, limits)

    def speak(part: SynthesisRequest) -> Iterator[TimedChunk]:
        return _synthesize(engine, part, timed)

    requests = [part.request for part in parts]
    spoken = lanes.segments(requests, speak) if lanes is not None else map(speak, requests)
    words: SourceWords | None = None
    for part in parts:
        if words is None or words.rewrite is not part.rewrite:
            # A word read across two segments ("five five five, one two three" for a phone
            # number cut at its comma) stays one word: held over while the rewrite goes on.
            if words is not None and (held_back := words.flush()):
                yield TimedChunk(PcmChunk.silence(0.0, engine.sample_rate), held_back)
            words = SourceWords(part.rewrite)
        if part.pause > 0:
            yield _Pause(PcmChunk.silence(part.pause, engine.sample_rate))
            elapsed += part.pause
        elif part.joined:
            yield _Pause(PcmChunk.silence(0.0, engine.sample_rate))
        said = next(spoken)
        if part.break_before or part.break_after:
            said = _trim_silence(said, part.break_before, part.break_after)
        chunks = carry_words(fade_edges, said)
        segment_start = elapsed
        with contextlib.closing(chunks):
            source: Iterable[TimedChunk] = chunks
            if loudness is not None:
                held = list(chunks)
                if not held:
                    continue
                whole = PcmChunk(np.concatenate([c.pcm.samples for c in held]), engine.sample_rate)
                found = tuple(word for chunk in held for word in chunk.words)
                source = [TimedChunk(normalize_loudness(whole, loudness), found)]
            for chunk in source:
                moved = words.feed(chunk.words, segment_start, part.start)
                yield TimedChunk(chunk.pcm, moved)
                elapsed += chunk.pcm.duration
    if words is not None and (held_back := words.flush()):
        # A word that a next one might still have belonged to ("five" of "$5").
        yield TimedChunk(PcmChunk.silence(0.0, engine.sample_rate), held_back)
    if tail > 0:
        yield _Pause(PcmChunk.silence(tail, engine.sample_rate))


# -40 dBFS: an engine's silence around its speech.
_QUIET = round(0.01 * 32767)
# Kept next to the speech, so a soft onset or decay is not cut.
_MARGIN_SECONDS = 0.01


def _earlier(word: WordTime, seconds: float) -> WordTime:
    moved = word.shifted(-seconds)
    return replace(moved, start_s=max(0.0, moved.start_s), end_s=max(0.0, moved.end_s))


def _trim_silence(chunks: Iterator[TimedChunk], lead: bool, tail: bool) -> Generator[TimedChunk]:
    """`chunks` without the silence the engine put before its speech (`lead`) or after it
    (`tail`); words move with the audio. Trailing quiet is held until more sound follows."""
    with contextlib.closing(chunks) if isinstance(chunks, Generator) else contextlib.nullcontext():
        cut = 0.0  # seconds
        started = not lead
        pending = np.zeros(0, np.int16)
        for chunk in chunks:
            rate = chunk.pcm.sample_rate
            samples = chunk.pcm.samples
            margin = round(_MARGIN_SECONDS * rate)
            loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > _QUIET)
            if not started:
                first = samples.shape[0] if loud.size == 0 else max(0, int(loud[0]) - margin)
                cut += first / rate
                samples, loud, started = samples[first:], loud - first, loud.size > 0
            if tail:
                samples = np.concatenate([pending, samples])
                loud = loud + pending.shape[0]
                end = 0 if loud.size == 0 else min(samples.shape[0], int(loud[-1]) + 1 + margin)
                samples, pending = samples[:end], samples[end:]
            words = tuple(_earlier(word, cut) for word in chunk.words)
            yield TimedChunk(PcmChunk(samples, rate), words)


def _synthesize(engine: Engine, request: SynthesisRequest, timed: bool) -> Iterator[TimedChunk]:
    if not timed:
        return _untimed(engine.synthesize(request))
    if isinstance(engine, WordTimer):
        return engine.synthesize_timed(request)
    return _estimated(engine.synthesize(request), request.text)


def _untimed(chunks: Iterator[PcmChunk]) -> Generator[TimedChunk]:
    with contextlib.closing(chunks) if isinstance(chunks, Generator) else contextlib.nullcontext():
        for pcm in chunks:
            yield TimedChunk(pcm)


def _estimated(chunks: Iterator[PcmChunk], text: str) -> Generator[TimedChunk]:
    """`chunks` whole, with `estimate_words` for their words."""
    with contextlib.closing(chunks) if isinstance(chunks, Generator) else contextlib.nullcontext():
        held = list(chunks)
    if not held:
        return
    whole = PcmChunk(np.concatenate([chunk.samples for chunk in held]), held[0].sample_rate)
    yield TimedChunk(held[0], tuple(estimate_words(text, whole)))
    for chunk in held[1:]:
        yield TimedChunk(chunk)


def render(
    engine: Engine,
    request: SynthesisRequest,
    output: OutputSpec,
    file: BinaryIO | None = None,
    lanes: Lanes | None = None,
    limits: SegmentLimits | None = None,
) -> Generator[EncodedChunk]:
    """Synthesize and encode, yielding bytes as the encoder releases them (into a seekable
    `file` instead, if given). Closing the iterator early stops the engine at its next chunk."""
    started = time.perf_counter()
    encoder = StreamEncoder(
        output.format, engine.sample_rate, output.sample_rate, file, output.bit_rate
    )
    try:
        spoken = _segments(
            engine, request, output.loudness_target, output.word_times, lanes, limits
        )
        with contextlib.closing(spoken) as timed_chunks:
            for chunk in timed_chunks:
                before = time.perf_counter()
                data = encoder.encode(chunk.pcm)
                done = time.perf_counter()
                # Heard after the priming a decoder plays first, where the stream cannot say.
                words = tuple(word.shifted(encoder.priming) for word in chunk.words)
                pcm = chunk.pcm.samples.tobytes() if output.keep_pcm else b""
                yield EncodedChunk(
                    data,
                    chunk.pcm.duration,
                    done - started,
                    done - before,
                    words,
                    pcm,
                    isinstance(chunk, _Pause),
                )
        before = time.perf_counter()
        tail = encoder.finish()
        done = time.perf_counter()
        yield EncodedChunk(tail, 0.0, done - started, done - before)
    finally:
        encoder.close()
