"""Word and character timestamps: when each word of the client's text is heard in the audio.

Characters are offsets into the text an engine or the pipeline was given, never into a
normalized copy; seconds are from the start of that text's audio as sent. Engines anchor words
with `words_from_anchors`; `trim_ends` then fits each word to its sound, so a pause belongs to
no word.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import unicodedata
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from speechgate.audio.pcm import PcmChunk
from speechgate.text import phonemes as phoneme_blocks
from speechgate.text.rewrite import Rewrite


@dataclass(frozen=True)
class WordTime:
    """Characters `start_char:end_char` of the text are heard from `start_s` to `end_s`."""

    start_char: int
    end_char: int
    start_s: float
    end_s: float
    spoken: str | None = None
    """What was said where it differs from the characters ("five dollars" for "$5")."""

    def shifted(self, seconds: float = 0.0, chars: int = 0) -> WordTime:
        return WordTime(
            self.start_char + chars,
            self.end_char + chars,
            self.start_s + seconds,
            self.end_s + seconds,
            self.spoken,
        )

    def scaled(self, factor: float) -> WordTime:
        return replace(self, start_s=self.start_s * factor, end_s=self.end_s * factor)


@dataclass(frozen=True)
class TimedChunk:
    """PCM and the words first known with it (their times may reach into later chunks)."""

    pcm: PcmChunk
    words: tuple[WordTime, ...] = ()


@dataclass(frozen=True)
class CharacterAlignment:
    """ElevenLabs' `alignment` shape: one start and end time per character of the text."""

    characters: list[str]
    character_start_times_seconds: list[float]
    character_end_times_seconds: list[float]

    def __add__(self, following: CharacterAlignment) -> CharacterAlignment:
        return CharacterAlignment(
            self.characters + following.characters,
            self.character_start_times_seconds + following.character_start_times_seconds,
            self.character_end_times_seconds + following.character_end_times_seconds,
        )


# A token of punctuation only ("-", "&") stays whole: an engine may still say it.
_EDGE = "\"'\u201c\u201d\u2018\u2019()[]{}<>.,;:!?\u2026\u2014\u2013-\u00bf\u00a1*_"
_TOKEN = re.compile(r"\S+")


def word_spans(text: str) -> list[tuple[int, int]]:
    """The words of `text` as (start, end) offsets: tokens without edge punctuation; a
    phoneme block ("[[ həloʊ ]]") is one word, brackets included."""
    spans = []
    for run in phoneme_blocks.runs(text):
        if run.is_block:
            spans.append((run.start, run.end))
            continue
        for match in _TOKEN.finditer(text, run.start, run.end):
            start, end = match.span()
            while start < end and text[start] in _EDGE:
                start += 1
            while end > start and text[end - 1] in _EDGE:
                end -= 1
            spans.append((start, end) if start < end else match.span())
    return spans


def words_from_anchors(
    text: str, anchors: Iterable[tuple[int, float]], end_s: float
) -> list[WordTime]:
    """Word times from (character offset, seconds) anchors where an engine began a word.

    A word without anchors (merged into another by the engine) is interpolated by characters,
    unless it is punctuation only, which was not said. Each word ends where the next begins;
    `trim_ends` then ends them where their sound stops.
    """
    spans = word_spans(text)
    if not spans:
        return []
    starts: list[float | None] = [None] * len(spans)
    ends = [end for _, end in spans]
    for position, seconds in anchors:
        index = int(np.searchsorted(ends, position, side="right"))
        if index >= len(spans):
            index = len(spans) - 1
        current = starts[index]
        starts[index] = float(seconds) if current is None else min(current, float(seconds))
    known = [i for i, start in enumerate(starts) if start is not None]
    if not known:
        return []
    filled = _interpolate(spans, starts, known, end_s)
    # Anchors out of order (an engine revisiting a number's digits) must not reverse words.
    for index in range(1, len(filled)):
        filled[index] = max(filled[index], filled[index - 1])
    kept = [
        index
        for index, (start, end) in enumerate(spans)
        if starts[index] is not None or any(char.isalnum() for char in text[start:end])
    ]
    words = []
    for index, following in zip(kept, [*kept[1:], None], strict=True):
        start_s = filled[index]
        end = end_s if following is None else filled[following]
        words.append(WordTime(*spans[index], start_s, max(start_s, end)))
    return words


def _interpolate(
    spans: list[tuple[int, int]], starts: list[float | None], known: list[int], end_s: float
) -> list[float]:
    positions = [float(spans[i][0]) for i in known]
    times = [start for start in starts if start is not None]
    if known[-1] != len(spans) - 1:
        positions.append(float(spans[-1][1]))
        times.append(max(end_s, times[-1]))
    return [
        start if start is not None else float(np.interp(span[0], positions, times))
        for span, start in zip(spans, starts, strict=True)
    ]


_SILENCE = 180  # about -45 dBFS


def trim_ends(
    words: Sequence[WordTime], pcm: PcmChunk, offset: float = 0.0, *, whole: bool = False
) -> list[WordTime]:
    """`words` (times from `offset` seconds before `pcm`) trimmed to their sound, so a pause
    falls between words. With `whole` (`pcm` is one model run of the whole text), the first
    word starts at the first sound even before the engine's placement: engines' first sound
    leads their first phoneme."""
    rate = pcm.sample_rate
    loud = np.abs(pcm.samples.astype(np.int32)) > _SILENCE
    trimmed = []
    for index, word in enumerate(words):
        leading = whole and index == 0
        first = 0 if leading else max(round((word.start_s - offset) * rate), 0)
        last = min(round((word.end_s - offset) * rate), pcm.num_samples)
        sounding = np.flatnonzero(loud[first:last])
        if sounding.size:
            start = offset + (first + int(sounding[0])) / rate
            end = offset + (first + int(sounding[-1]) + 1) / rate
            word = replace(word, start_s=start, end_s=max(start, end))
        trimmed.append(word)
    return trimmed


def carry_words(
    transform: Callable[[Iterator[PcmChunk]], Iterator[PcmChunk]],
    timed: Iterable[TimedChunk],
    scale: float = 1.0,
) -> Generator[TimedChunk]:
    """`transform` applied to the PCM of `timed`, each output chunk carrying the words of the
    input taken to make it, times multiplied by `scale`. Closing this closes both."""
    source = iter(timed)
    taken: list[WordTime] = []
    rates: list[int] = []

    def pcm() -> Generator[PcmChunk]:
        try:
            for chunk in source:
                taken.extend(word.scaled(scale) for word in chunk.words)
                rates.append(chunk.pcm.sample_rate)
                yield chunk.pcm
        finally:
            if isinstance(source, Generator):
                source.close()

    output = transform(pcm())
    with contextlib.closing(output) if isinstance(output, Generator) else contextlib.nullcontext():
        for chunk in output:
            words = tuple(taken)
            taken.clear()
            rates.append(chunk.sample_rate)
            yield TimedChunk(chunk, words)
    if taken:  # words of input the transform turned into no output at all
        yield TimedChunk(PcmChunk(np.zeros(0, np.int16), rates[-1]), tuple(taken))


def character_alignment(
    text: str, words: Sequence[WordTime], spoken: bool = False
) -> CharacterAlignment:
    """One start and end per character of `text`: a word's characters share its time evenly,
    those between words share the gap."""
    aligner = CharacterAligner(text, spoken)
    return aligner.add(words) + aligner.finish()


class CharacterAligner:
    """`character_alignment` for words streamed in text order: `add` returns the characters
    each batch makes final, `finish` the rest. Not thread-safe."""

    def __init__(self, text: str, spoken: bool = False) -> None:
        """`spoken`: align the text as it was said (ElevenLabs' `normalized_alignment`), each
        word's `spoken` form in place of its characters."""
        self._text = text
        self._spoken = spoken
        self._char = 0
        self._time = 0.0

    def add(self, words: Iterable[WordTime]) -> CharacterAlignment:
        characters: list[str] = []
        starts: list[float] = []
        ends: list[float] = []
        for word in sorted(words, key=lambda w: w.start_char):
            if word.start_char < self._char or word.end_char > len(self._text):
                continue
            between = self._text[self._char : word.start_char]
            said = self._text[word.start_char : word.end_char]
            if self._spoken and word.spoken is not None:
                said = word.spoken
            characters += [*between, *said]
            _spread(starts, ends, len(between), self._time, word.start_s)
            _spread(starts, ends, len(said), word.start_s, word.end_s)
            self._char, self._time = word.end_char, max(word.end_s, word.start_s)
        return CharacterAlignment(characters, starts, ends)

    def finish(self) -> CharacterAlignment:
        first, self._char = self._char, len(self._text)
        starts: list[float] = []
        ends: list[float] = []
        _spread(starts, ends, self._char - first, self._time, self._time)
        return CharacterAlignment(list(self._text[first:]), starts, ends)


class WordsFromCharacters:
    """Word times from streamed character times of `text` (ElevenLabs' `alignment`). Not
    thread-safe."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._spans = word_spans(text)
        self._next = 0
        self._starts: list[float] = []
        self._ends: list[float] = []

    def add(
        self, characters: Sequence[str], starts: Sequence[float], ends: Sequence[float]
    ) -> list[WordTime]:
        """The words these next characters of the text complete."""
        known = len(self._starts)
        if "".join(characters) != self._text[known : known + len(characters)]:
            raise ValueError(f"the characters from offset {known} are not the text's")
        if not len(starts) == len(ends) == len(characters):
            raise ValueError("not one start and one end time per character")
        self._starts += [float(t) for t in starts]
        self._ends += [float(t) for t in ends]
        words = []
        while self._next < len(self._spans) and self._spans[self._next][1] <= len(self._starts):
            start, end = self._spans[self._next]
            words.append(WordTime(start, end, self._starts[start], self._ends[end - 1]))
            self._next += 1
        return words


class SourceWords:
    """Word times of a rewritten text moved to the characters the client sent: the spoken
    words for one written word ("five dollars" for "$5") become one, so a rewritten word is
    held until the next shows whether it goes on."""

    def __init__(self, rewrite: Rewrite) -> None:
        self.rewrite = rewrite
        self._held: WordTime | None = None
        self._said = (0, 0)  # the held word's characters in `rewrite.spoken`

    def feed(
        self, words: Iterable[WordTime], seconds: float, offset: int = 0
    ) -> tuple[WordTime, ...]:
        """`words` of a segment at `offset` of `rewrite.spoken`, moved to the client's
        characters and `seconds` later; those complete so far."""
        done: list[WordTime] = []
        for word in words:
            said = (word.start_char + offset, word.end_char + offset)
            start, end = self.rewrite.source_span(*said)
            moved = WordTime(start, end, word.start_s + seconds, word.end_s + seconds)
            held = self._held
            if held is not None and (held.start_char, held.end_char) == (start, end):
                said = (self._said[0], said[1])
                moved = replace(held, end_s=max(held.end_s, moved.end_s))
            elif held is not None:
                done.extend(self.flush())
            self._held, self._said = moved, said
            if self.rewrite.kept(start, end):
                done.extend(self.flush())
        return tuple(done)

    def flush(self) -> tuple[WordTime, ...]:
        held, self._held = self._held, None
        if held is None:
            return ()
        if self.rewrite.kept(held.start_char, held.end_char):
            return (held,)
        return (replace(held, spoken=self.rewrite.spoken[self._said[0] : self._said[1]]),)


class WordFeed:
    """Word times beside an answer's bytes: the producer `add`s them before yielding the
    bytes, the reader `take`s them after each. One event loop only."""

    def __init__(self) -> None:
        self._words: list[WordTime] = []

    def add(self, words: Iterable[WordTime]) -> None:
        self._words.extend(words)

    def take(self) -> tuple[WordTime, ...]:
        taken = tuple(self._words)
        self._words.clear()
        return taken


def _spread(starts: list[float], ends: list[float], count: int, begin: float, end: float) -> None:
    if count <= 0:
        return
    end = max(end, begin)
    step = (end - begin) / count
    for index in range(count):
        starts.append(round(begin + index * step, 4))
        ends.append(round(begin + (index + 1) * step, 4))


def first_sounds(words: Sequence[Sequence[str]], spoken: Sequence[str]) -> list[int | None]:
    """For each word's phonemes (phonemized alone), the index in `spoken` (the whole text as
    the engine spoke it) of its first sound, or None. Aligned on sounds only: stress marks and
    punctuation differ between a word alone and in context."""
    ours: list[str] = []
    owner: list[int] = []
    for index, phonemes in enumerate(words):
        for phoneme in phonemes:
            if _is_sound(phoneme):
                ours.append(phoneme)
                owner.append(index)
    theirs = [index for index, phoneme in enumerate(spoken) if _is_sound(phoneme)]
    matcher = difflib.SequenceMatcher(None, ours, [spoken[i] for i in theirs], autojunk=False)
    firsts: list[int | None] = [None] * len(words)
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            word = owner[block.a + offset]
            if firsts[word] is None:
                firsts[word] = theirs[block.b + offset]
    return firsts


def word_onsets(words: Sequence[Sequence[str]], spoken: Sequence[str]) -> list[int | None]:
    """For each word, the index in `spoken` where it begins to be heard: the separators and
    stress marks before its first sound, as duration models voice the next sound's onset in
    their frames. Punctuation's frames are a pause, so they do not count."""
    return [
        None if first is None else lead_in(spoken, first) for first in first_sounds(words, spoken)
    ]


def lead_in(spoken: Sequence[str], first: int) -> int:
    """The start of the separators and stress marks right before `spoken[first]`."""
    while first > 0 and spoken[first - 1] in _LEADS:
        first -= 1
    return first


_MARKS = "\u02c8\u02cc\u02d0"  # stress and length: letters, but no sound of their own
_LEADS = frozenset(" \u02c8\u02cc")


def _is_sound(phoneme: str) -> bool:
    return bool(phoneme) and unicodedata.category(phoneme[0])[0] in "LM" and phoneme not in _MARKS


# Estimating: a pause is at least this long, and quieter than this share of the loudest 10 ms.
_PAUSE_SECONDS = 0.12
_QUIET_SHARE = 0.04
_BREAK = re.compile("[,;:.!?\u2026\u2014\u2013]")


def estimate_words(text: str, pcm: PcmChunk) -> list[WordTime]:
    """Word times for `text` spoken as `pcm`, by an engine that cannot say them: each phrase
    its run of sound when the counts match, words sharing it by their letters and digits."""
    spans = word_spans(text)
    if not spans:
        return []
    runs = _sound_runs(pcm)
    if not runs:
        return []
    phrases: list[list[tuple[int, int]]] = [[]]
    for index, span in enumerate(spans):
        phrases[-1].append(span)
        following = text[span[1] : spans[index + 1][0]] if index + 1 < len(spans) else ""
        if _BREAK.search(following):
            phrases.append([])
    phrases = [phrase for phrase in phrases if phrase]
    if len(phrases) != len(runs):
        phrases, runs = [spans], [(runs[0][0], runs[-1][1])]
    anchors: list[tuple[int, float]] = []
    for phrase, (begin, end) in zip(phrases, runs, strict=True):
        weights = np.array([max(1, sum(c.isalnum() for c in text[a:b])) for a, b in phrase])
        offsets = np.concatenate([[0.0], np.cumsum(weights)[:-1]]) / weights.sum()
        anchors += [
            (a, begin + (end - begin) * float(o)) for (a, _), o in zip(phrase, offsets, strict=True)
        ]
    return trim_ends(words_from_anchors(text, anchors, runs[-1][1]), pcm)


def _sound_runs(pcm: PcmChunk) -> list[tuple[float, float]]:
    window = max(1, round(0.01 * pcm.sample_rate))
    count = pcm.num_samples // window
    if count == 0:
        return []
    peaks = np.abs(pcm.samples[: count * window].astype(np.int32)).reshape(count, window).max(1)
    loud = peaks > max(_SILENCE, _QUIET_SHARE * int(peaks.max()))
    runs: list[list[int]] = []
    shortest_pause = round(_PAUSE_SECONDS / 0.01)
    for index in np.flatnonzero(loud):
        if runs and index - runs[-1][1] <= shortest_pause:
            runs[-1][1] = int(index) + 1
        else:
            runs.append([int(index), int(index) + 1])
    return [(a * window / pcm.sample_rate, b * window / pcm.sample_rate) for a, b in runs]
