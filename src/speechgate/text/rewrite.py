"""Text rewritten for speaking, with where each part of it came from.

Word times must point at the client's characters, so each rewrite (normalization, lexicon,
SSML) keeps a map: parts kept one for one, or replacements standing for their source range as a
whole. Rewrites compose (`then`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    """Spoken characters `spoken_start:spoken_end` come from source `source_start:source_end`,
    character for character if `same`."""

    source_start: int
    source_end: int
    spoken_start: int
    spoken_end: int
    same: bool


@dataclass(frozen=True)
class Rewrite:
    """`spoken`, made from `source`; `parts` cover both texts in order, without gaps."""

    source: str
    spoken: str
    parts: tuple[Part, ...]

    @classmethod
    def identity(cls, text: str) -> Rewrite:
        return cls(text, text, (Part(0, len(text), 0, len(text), True),) if text else ())

    @classmethod
    def from_replacements(
        cls, source: str, replacements: Iterable[tuple[int, int, str]]
    ) -> Rewrite:
        """`source` with each (start, end, spoken) range replaced, in order, not overlapping."""
        builder = RewriteBuilder(source)
        for start, end, spoken in replacements:
            builder.replace(start, end, spoken)
        return builder.build()

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """The source characters that spoken characters `start:end` stand for: a range that
        touches a replacement takes all of that replacement's source."""
        if not self.parts:
            return 0, 0
        if end <= start:
            position = self._source_position(start)
            return position, position
        first = self.parts[self._part_at(start)]
        last = self.parts[self._part_at(end - 1)]
        begin = (
            first.source_start + (start - first.spoken_start) if first.same else first.source_start
        )
        finish = last.source_start + (end - last.spoken_start) if last.same else last.source_end
        return begin, max(begin, finish)

    def kept(self, start: int, end: int) -> bool:
        return any(
            part.same and part.source_start <= start and end <= part.source_end
            for part in self.parts
        )

    def then(self, following: Rewrite) -> Rewrite:
        """This rewrite, then `following` (whose source is this one's spoken text)."""
        if following.source != self.spoken:
            raise ValueError("the following rewrite is not of this one's spoken text")
        merged: list[Part] = []
        for piece in self._through(following):
            if merged and merged[-1].source_end > piece.source_start:
                # Two pieces of one earlier replacement: they stand for it together.
                previous = merged.pop()
                piece = Part(
                    previous.source_start,
                    max(previous.source_end, piece.source_end),
                    previous.spoken_start,
                    piece.spoken_end,
                    False,
                )
            merged.append(piece)
        return Rewrite(self.source, following.spoken, _joined(merged))

    def _through(self, following: Rewrite) -> Iterable[Part]:
        """`following`'s parts in this rewrite's source; a kept part is cut where this
        rewrite's parts meet, so what this one kept stays one for one."""
        for part in following.parts:
            if not part.same:
                start, end = self._span_of(part.source_start, part.source_end)
                yield Part(start, end, part.spoken_start, part.spoken_end, False)
                continue
            for mine in self.parts:
                low = max(part.source_start, mine.spoken_start)
                high = min(part.source_end, mine.spoken_end)
                if low >= high:
                    continue
                start, end = self._span_of(low, high)
                spoken = part.spoken_start + (low - part.source_start)
                yield Part(start, end, spoken, spoken + high - low, mine.same)

    def _span_of(self, start: int, end: int) -> tuple[int, int]:
        if start == end:
            position = self._source_position(start)
            return position, position
        return self.source_span(start, end)

    def _part_at(self, spoken: int) -> int:
        starts = [part.spoken_start for part in self.parts]
        index = bisect.bisect_right(starts, spoken) - 1
        index = max(0, min(index, len(self.parts) - 1))
        while index < len(self.parts) - 1 and self.parts[index].spoken_end <= spoken:
            index += 1
        return index

    def _source_position(self, spoken: int) -> int:
        """Where in the source spoken position `spoken` (between characters) falls."""
        for part in self.parts:
            if spoken < part.spoken_end or (spoken == part.spoken_end and part is self.parts[-1]):
                if part.same:
                    return part.source_start + (spoken - part.spoken_start)
                return part.source_start if spoken == part.spoken_start else part.source_end
        return len(self.source)


class RewriteBuilder:
    def __init__(self, source: str) -> None:
        self._source = source
        self._spoken: list[str] = []
        self._parts: list[Part] = []
        self._source_at = 0
        self._spoken_at = 0

    def replace(self, start: int, end: int, spoken: str) -> None:
        """Say `spoken` for source characters `start:end`, after the last replacement."""
        if start < self._source_at or end < start or end > len(self._source):
            raise ValueError(f"replacement {start}:{end} out of order or out of range")
        self._keep(start)
        if start == end and not spoken:
            return
        self._add(Part(start, end, self._spoken_at, self._spoken_at + len(spoken), False), spoken)

    def build(self) -> Rewrite:
        self._keep(len(self._source))
        return Rewrite(self._source, "".join(self._spoken), _joined(self._parts))

    def _keep(self, until: int) -> None:
        if until > self._source_at:
            length = until - self._source_at
            kept = Part(self._source_at, until, self._spoken_at, self._spoken_at + length, True)
            self._add(kept, self._source[self._source_at : until])

    def _add(self, part: Part, spoken: str) -> None:
        self._parts.append(part)
        self._spoken.append(spoken)
        self._source_at = part.source_end
        self._spoken_at = part.spoken_end


def _joined(parts: list[Part]) -> tuple[Part, ...]:
    joined: list[Part] = []
    for part in parts:
        if joined and part.same and joined[-1].same:
            previous = joined.pop()
            part = Part(
                previous.source_start, part.source_end, previous.spoken_start, part.spoken_end, True
            )
        joined.append(part)
    return tuple(joined)
