"""A lone job's segments spoken two at a time, a core each, while its worker has every core.

For a `SideBySide` engine, two segments at once, a thread each, make more audio a second than
one after the other on both cores, whose threads wait for each other at every step of the
graph. The first segment always runs alone and wide, as a pair would delay the first audio.
A pair is spoken whole before either is handed on, so the engine is idle whenever the worker
turns to another job or acts on its messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from speechgate.engines.base import Elastic, Engine, SideBySide, SynthesisRequest

T = TypeVar("T")

# The longer segment's largest share of a pair's characters: each lane runs at a little over
# half the speed of one wide segment, so a pair more lopsided waits on its longer half for more
# than the wide run of both would take.
BALANCE = 0.55


class Lanes:
    """One worker's engine width, and the pairs of a job's segments it speaks side by side.
    Use from the worker's thread; a pair's second segment runs on a helper thread."""

    def __init__(self, engine: Engine, widths: Sequence[int]) -> None:
        self._engine = engine
        self._narrowest = min(widths)
        self.widest = max(widths)
        self._side_by_side = isinstance(engine, SideBySide) and engine.side_by_side
        self._helper: ThreadPoolExecutor | None = None
        if self._side_by_side:
            # Started now: a thread started while the pool moves the worker's threads could
            # keep cores the job no longer has.
            self._helper = ThreadPoolExecutor(1, thread_name_prefix="speechgate-lane")
            self._helper.submit(int).result()
        self.width = self._narrowest
        self.pairs = 0

    def set_width(self, threads: int) -> None:
        self.width = threads
        self._use_threads(threads)

    @property
    def open(self) -> bool:
        """Whether two segments may run side by side now: the job has exactly two narrow
        segments' worth of threads (wider, a pair would leave cores idle)."""
        return self._side_by_side and self.width == 2 * self._narrowest

    def segments(
        self, parts: Sequence[SynthesisRequest], speak: Callable[[SynthesisRequest], Iterator[T]]
    ) -> Iterator[Iterator[T]]:
        """`speak(part)` for each of `parts` in order, later ones in pairs while the lanes are
        open and the two are balanced. Use up each iterator before asking for the next."""
        index = 0
        while index < len(parts):
            pair = parts[index : index + 2]
            if index and len(pair) == 2 and self.open and _balanced(*pair):
                first, second = self._pair(pair[0], pair[1], speak)
                self.pairs += 1
                yield iter(first)
                yield iter(second)
                index += 2
            else:
                yield speak(parts[index])
                index += 1

    def close(self) -> None:
        if self._helper is not None:
            self._helper.shutdown(wait=True)
            self._helper = None

    def _pair(
        self,
        first: SynthesisRequest,
        second: SynthesisRequest,
        speak: Callable[[SynthesisRequest], Iterator[T]],
    ) -> tuple[list[T], list[T]]:
        """Both parts' chunks, spoken at once on the narrowest width."""
        assert self._helper is not None
        self._use_threads(self._narrowest)
        try:
            later = self._helper.submit(lambda: list(speak(second)))
            try:
                spoken = list(speak(first))
            finally:
                wait([later])
            return spoken, later.result()
        finally:
            self._use_threads(self.width)

    def _use_threads(self, threads: int) -> None:
        if isinstance(self._engine, Elastic):
            self._engine.use_threads(threads)


def _balanced(first: SynthesisRequest, second: SynthesisRequest) -> bool:
    longer = max(len(first.text), len(second.text))
    return longer <= BALANCE * (len(first.text) + len(second.text))
