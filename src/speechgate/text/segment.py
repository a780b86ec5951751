"""Split text into speakable segments: sentences, with a short first one and no overlong ones.

Boundaries decide how early the first audio comes and where pauses fall; a bad split ("Dr.",
"3." before "14") puts a pause mid-phrase, so each is checked against abbreviations, initials
and the word that follows. `Segmenter` works on text as it arrives, `segment()` on a whole text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from speechgate.text import phonemes

FIRST_AUDIO_SECONDS = 0.3
"""The compute time to first audio the first segment is sized for: well under the half second
after which a listener notices a wait."""

# Lower-cased, without their final period.
_ABBREVIATIONS = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "mr mrs ms mx dr prof sr jr st mt ft vs etc e.g i.e cf al approx dept est fig figs "
        "inc ltd co corp no nos vol vols p pp ch sec gen col lt sgt capt cmdr rev hon gov pres "
        "rep sen jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun "
        "u.s u.k u.n a.m p.m ph.d b.a m.a"
    ).split()
)

# Escapes, so typographic quotes and dashes cannot be misread for ASCII ones.
_CLOSERS = "\"'\u201d\u2019)\\]"  # straight quotes, right double and single quote, ) ]
_OPENERS = "\"'\u201c\u2018(["  # straight quotes, left double and single quote, ( [
_DASHES = "\u2014\u2013"  # em dash, en dash
_CJK_ENDS = "\u3002\uff01\uff1f"  # ideographic full stop, fullwidth ! and ?: no space follows

_END = re.compile(rf"[.!?\u2026]+[{_CLOSERS}]*(?=\s)|[{_CJK_ENDS}]+[{_CLOSERS}]*|\n\s*\n")
_CLAUSE = re.compile(rf"[,;:{_DASHES}][{_CLOSERS}]*\s|\s[{_DASHES}-]\s")
_ENDS_CLAUSE = re.compile(rf"[,;:{_DASHES}-][{_CLOSERS}]*$")
_LAST_WORD = re.compile(rf"(\S+?)[.!?\u2026]+[{_CLOSERS}]*$")
# What no engine should see: a NUL ends the text for espeak-ng's C API and makes Piper's
# phonemizer raise; lone surrogates cannot be encoded as UTF-8.
_UNSPEAKABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def clean_text(text: str) -> str:
    """`text` with every control character a space, keeping apart the words it separated."""
    return _UNSPEAKABLE.sub(" ", text)


# A first sentence with no clause punctuation may be cut before one of these. Not "or", "so"
# or "yet": as often inside a phrase ("tea or coffee") as between clauses.
_CONJUNCTION = re.compile(r"\s(?=(?:and|but|because|although|though|whereas|while)\s)", re.I)
_LOOKAHEAD = len(" although ")


@dataclass(frozen=True)
class SegmentLimits:
    """`first` bounds the first segment, `longest` every other one. `first_clause`, where set,
    is what the engine speaks within the time to first audio aimed at: a longer first sentence
    is cut at a clause boundary, never leaving fewer than `fewest_words` words before it."""

    first: int = 100
    longest: int = 400
    shortest_clause: int = 24  # for a forced cut
    first_clause: int | None = None
    fewest_words: int = 3

    @classmethod
    def for_speed(
        cls, characters_per_second: float | None, seconds: float = FIRST_AUDIO_SECONDS
    ) -> SegmentLimits:
        """The limits of an engine speaking `characters_per_second`, aiming at first audio
        within `seconds` of compute; the defaults for None."""
        if characters_per_second is None or characters_per_second <= 0:
            return cls()
        return cls(first_clause=max(1, round(characters_per_second * seconds)))


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
        self._buffer += clean_text(delta)
        yield from self._release(final=False)

    def flush(self) -> Iterator[str]:
        """The text so far is complete: yield what is left."""
        yield from self._release(final=True)

    def tentative(self) -> str | None:
        """The segment the next word would complete if it starts a sentence ("fine." before
        "This"), or None: what may be synthesized ahead while that word is being written."""
        text = self._buffer.rstrip()
        # A capital never continues a sentence, so it can cause only a cut at the end.
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
        cut = self._sentence_cut(text, final)
        if self._released == 0 and self._limits.first_clause is not None:
            return self._clause_cut(text, cut, self._limits.first_clause)
        return cut

    def _sentence_cut(self, text: str, final: bool) -> int | None:
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

    def _clause_cut(self, text: str, cut: int | None, budget: int) -> int | None:
        """Where the first segment ends: `cut` (the sentence's end, None while unknown), or a
        clause boundary before it past `budget`, chosen only once no text to come can change
        it, so text fed piece by piece is cut as the whole text would be."""
        sentence = text if cut is None else text[:cut]
        lead = len(sentence) - len(sentence.lstrip())
        if len(sentence.strip()) <= budget:
            return cut  # also while unknown: it may still end within the budget
        fewest = self._limits.fewest_words
        candidates = sorted(
            [m.end() for m in _CLAUSE.finditer(sentence)]
            + [m.end() for m in _CONJUNCTION.finditer(sentence)]
        )
        blocks = phonemes.blocks(sentence)
        within: int | None = None
        for position in candidates:
            if _inside(blocks, position):
                continue  # a phoneme block is never cut
            before, after = sentence[:position], sentence[position:]
            needed = fewest + 1 if _CONJUNCTION.match(sentence, position - 1) else fewest
            if len(before.split()) < needed or not after.strip():
                continue
            if position - lead <= budget:
                within = position  # the last one within the budget is wanted: look on
            else:
                return within if within is not None else position
        # Every boundary within the budget is final once the text runs past it by more than
        # a conjunction's look-ahead.
        settled = len(sentence) - lead > budget + _LOOKAHEAD and sentence[lead + budget :].strip()
        if within is not None and (cut is not None or settled):
            return within
        return cut

    def _forced_cut(self, text: str, limit: int, blocks: list[tuple[int, int]]) -> int:
        """Cut a too-long sentence at its last clause break within the limit, else its last
        space, else the limit; never inside a phoneme block."""
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
    return any(start < position < end for start, end in blocks)


def continues_sentence(previous: str, following: str) -> bool:
    """Whether segment `following` goes on with the sentence `previous` was cut from: engines
    speak the pause of such a cut themselves."""
    return _ENDS_CLAUSE.search(previous) is not None or following[:1].islower()


def segment(text: str, limits: SegmentLimits | None = None) -> list[str]:
    segmenter = Segmenter(limits)
    return [*segmenter.feed(text), *segmenter.flush()]


def offsets(text: str, segments: Iterable[str]) -> Iterator[int]:
    """Where each of `segments` (from `segment(text)`, in order) starts in `text`."""
    cleaned = clean_text(text)
    position = 0
    for piece in segments:
        found = cleaned.find(piece, position)
        if found < 0:
            raise ValueError(f"{piece!r} is not a segment of the text")
        yield found
        position = found + len(piece)


def mask_abbreviation_periods(text: str) -> str:
    """`text` with a space for each period before a capital that does not end a sentence
    ("Dr. Okafor"), at the same offsets: espeak-ng would end a sentence there, with a falling
    tone and a pause. Before a lower-case word the period stays ("e.g.")."""
    masked = list(text)
    for end in _END.finditer(text):
        following = text[end.end() :].lstrip()[:1]
        if end.group()[0] == "." and following.isupper() and _ends_sentence(text, end) is False:
            masked[end.start()] = " "
    return "".join(masked)
