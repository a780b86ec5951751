"""Split text into speakable segments: sentences, with a short first one and no overlong ones.

Segments are what the streaming pipeline synthesizes one after another, so their boundaries
decide how early the first audio comes and where pauses fall. A bad split ("Dr." ending a
sentence, "3." before "14") puts a pause in the middle of a phrase, so each candidate boundary
is checked against abbreviations, initials and the word that follows.

`Segmenter` works incrementally (text arriving as an LLM writes it); `segment()` applies the
same rules to a whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from speechgate.text import phonemes

# Lower-cased, without their final period.
_ABBREVIATIONS = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "mr mrs ms mx dr prof sr jr st mt ft vs etc e.g i.e cf al approx dept est fig figs "
        "inc ltd co corp no nos vol vols p pp ch sec gen col lt sgt capt cmdr rev hon gov pres "
        "rep sen jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun "
        "u.s u.k u.n a.m p.m ph.d b.a m.a"
    ).split()
)

# Typographic quotes and dashes, spelled as escapes so they cannot be misread for ASCII ones.
_CLOSERS = "\"'\u201d\u2019)\\]"  # straight quotes, right double and single quote, ) ]
_OPENERS = "\"'\u201c\u2018(["  # straight quotes, left double and single quote, ( [
_DASHES = "\u2014\u2013"  # em dash, en dash
_CJK_ENDS = "\u3002\uff01\uff1f"  # ideographic full stop, fullwidth ! and ?: no space follows

# A sentence ends at . ! ? or an ellipsis (possibly repeated, possibly followed by closing
# quotes or brackets) before whitespace, at a CJK sentence end, or at a blank line.
_END = re.compile(rf"[.!?\u2026]+[{_CLOSERS}]*(?=\s)|[{_CJK_ENDS}]+[{_CLOSERS}]*|\n\s*\n")
# Where a sentence that is too long may be cut: after clause punctuation or around a dash.
_CLAUSE = re.compile(rf"[,;:{_DASHES}][{_CLOSERS}]*\s|\s[{_DASHES}-]\s")
_LAST_WORD = re.compile(rf"(\S+?)[.!?\u2026]+[{_CLOSERS}]*$")
# What no engine should see: C0 and C1 controls but tab and newline (a NUL ends the text for
# espeak-ng's C API and makes Piper's phonemizer raise), lone surrogates (not encodable as
# UTF-8) and the noncharacters U+FFFE/U+FFFF.
_UNSPEAKABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def clean_text(text: str) -> str:
    """`text` with every control character a space: a space keeps the words apart that a
    control character separated ("one\x00two"), and segmentation collapses spaces anyway."""
    return _UNSPEAKABLE.sub(" ", text)


@dataclass(frozen=True)
class SegmentLimits:
    """`first` bounds the first segment (short, so the first audio comes early); `longest`
    bounds every other one (about what an engine speaks well in one go)."""

    first: int = 100
    longest: int = 400
    shortest_clause: int = 24  # a forced cut never leaves a piece shorter than this


def _ends_sentence(text: str, end: re.Match[str]) -> bool | None:
    """Whether `end` closes a sentence; None while that depends on text not yet seen."""
    if not end.group().strip():  # a paragraph break
        return True
    following = text[end.end() :].lstrip()
    if not following:
        return None  # the next word decides: "e.g. this" vs "fine. This"
    if end.group()[0] == ".":
        last = _LAST_WORD.search(text[: end.end()])
        word = last.group(1).lower().lstrip(_OPENERS) if last else ""
        if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):  # "Dr.", "J. R."
            return False
    return not following[0].islower()


class Segmenter:
    """Collects text as it arrives and releases each segment as soon as it is complete."""

    def __init__(self, limits: SegmentLimits | None = None) -> None:
        self._limits = limits or SegmentLimits()
        self._buffer = ""
        self._released = 0

    def feed(self, delta: str) -> Iterator[str]:
        """Add text; yield the segments it completes."""
        self._buffer += clean_text(delta)
        yield from self._release(final=False)

    def flush(self) -> Iterator[str]:
        """The text so far is complete (or must be spoken now): yield what is left."""
        yield from self._release(final=True)

    def tentative(self) -> str | None:
        """The segment the next word would complete if it starts a sentence ("fine." before
        "This", where "and" would continue it), or None if no next word can complete one: what
        may be synthesized ahead while that word is still being written."""
        text = self._buffer.rstrip()
        # The probe is a capital, which is never the reason to go on ("fine. A" ends a sentence
        # if any next word does), so a cut exactly at the end is the only one it can cause.
        if self._next_cut(f"{text} A", final=False) == len(text):
            return text.strip()
        return None

    def _release(self, final: bool) -> Iterator[str]:
        while (cut := self._next_cut(self._buffer, final)) is not None:
            segment, self._buffer = self._buffer[:cut].strip(), self._buffer[cut:]
            if segment:
                self._released += 1
                yield segment
        if final:
            self._buffer = ""

    def _next_cut(self, text: str, final: bool) -> int | None:
        limit = self._limits.first if self._released == 0 else self._limits.longest
        blocks = phonemes.blocks(text)
        for end in _END.finditer(text):
            if end.end() > limit:
                break
            if _inside(blocks, end.start()):
                continue  # IPA's "." parts syllables: a phoneme block is never cut
            verdict = _ends_sentence(text, end)
            if verdict is None and not final:
                return None  # wait for the next word
            if verdict is not False:
                return end.end()
        if len(text.strip()) > limit:
            return self._forced_cut(text, limit, blocks)
        return len(text) if final and text.strip() else None

    def _forced_cut(self, text: str, limit: int, blocks: list[tuple[int, int]]) -> int:
        """Cut a too-long sentence at its last clause break within the limit, else at its
        last space, else (one unbroken token) at the limit itself; never inside a phoneme
        block (one so long that nothing else is left is cut after it)."""
        window = text[: limit + 1]
        shortest = self._limits.shortest_clause
        clauses = [
            m.end()
            for m in _CLAUSE.finditer(window)
            if m.end() >= shortest and not _inside(blocks, m.end())
        ]
        if clauses:
            return clauses[-1]
        spaces = [i + 1 for i in range(shortest, len(window)) if window[i] == " "]
        spaces = [cut for cut in spaces if not _inside(blocks, cut)]
        if spaces:
            return spaces[-1]
        return next((end for start, end in blocks if start < limit < end), limit)


def _inside(blocks: list[tuple[int, int]], position: int) -> bool:
    """Whether `position` falls within one of `blocks` (not at its edges)."""
    return any(start < position < end for start, end in blocks)


def segment(text: str, limits: SegmentLimits | None = None) -> list[str]:
    """Split a whole text at once."""
    segmenter = Segmenter(limits)
    return [*segmenter.feed(text), *segmenter.flush()]


def offsets(text: str, segments: Iterable[str]) -> Iterator[int]:
    """Where each of `segments` (from `segment(text)`, in order) starts in `text`.

    Segments are stripped slices of `text` with control characters made spaces (one for one),
    so each is found as it is, after the previous one.
    """
    cleaned = clean_text(text)
    position = 0
    for piece in segments:
        found = cleaned.find(piece, position)
        if found < 0:
            raise ValueError(f"{piece!r} is not a segment of the text")
        yield found
        position = found + len(piece)


def mask_abbreviation_periods(text: str) -> str:
    """`text` with a space for each period before a capital that does not end a sentence here
    ("Dr. Okafor", "J. R. Tolkien"), at the same offsets, so positions still point into `text`.

    espeak-ng, which phonemizes for Piper and Kokoro and speaks for itself, ends a sentence at
    every such period: "Dr. Okafor" became "Doctor." with a falling tone and a pause, then
    "Okafor". Without the period it reads "Doctor Okafor" in one breath, still expanded. Before
    a lower-case word it does not split, and the period is what makes "e.g." "for example".
    """
    masked = list(text)
    for end in _END.finditer(text):
        following = text[end.end() :].lstrip()[:1]
        if end.group()[0] == "." and following.isupper() and _ends_sentence(text, end) is False:
            masked[end.start()] = " "
    return "".join(masked)
