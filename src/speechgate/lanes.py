"""A lone job's segments spoken two at a time, a core each, while its worker has every core.

A job that runs alone gets every core (the pool widens its worker, see
`speechgate.workers.pool`), and its engine computes each segment on all of them. For an engine
that is `SideBySide`, two segments at once, one thread each, make more audio a second than that:
measured with Piper joe on 2 cores, in-process, four ~85-character sentences, six rounds taking
turns, 20.4x real time side by side against 17.3x one after the other on two threads, 1.18
times as fast (`bench/lanes.py` measures it on paragraphs, with this module: 1.16). So a lone
job's later segments go in pairs. Its first segment always runs alone and wide: a pair would
delay the first audio, which is what a listener waits for.

A pair is spoken whole before either is handed on, so the engine is idle again whenever the
worker turns to another job or acts on its messages: engines that are not thread-safe with
other jobs stay safe, and a width the gateway sends applies from the next segment, as ever.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from speechgate.engines.base import Elastic, Engine, SideBySide, SynthesisRequest

T = TypeVar("T")

# Two segments go side by side only if the longer is at most this share of the pair's
# characters. Side by side, each ran at 0.59 of the speed one segment gets on both cores (the
# measurement above: 10.2x a thread against 17.3x): a longer share than that keeps the pair
# waiting on its longer half for more than the wide run of both would have taken.
BALANCE = 0.55


class Lanes:
    """One worker's engine width, and the pairs of a job's segments it speaks side by side.

    The worker sets `width` (the threads a job may compute with now) as the pool widens and
    narrows its job; `segments` reads it before each pair. Use from one thread (the worker's);
    the second segment of a pair runs on a helper thread of its own.
    """

    def __init__(self, engine: Engine, widths: Sequence[int]) -> None:
        self._engine = engine
        self._narrowest = min(widths)
        self.widest = max(widths)
        self._side_by_side = isinstance(engine, SideBySide) and engine.side_by_side
        self._helper: ThreadPoolExecutor | None = None
        if self._side_by_side:
            # Its thread is started now, not at the first pair: a thread inherits the cores
            # of the one that starts it, and one started while the pool moves the worker's
            # threads (which it lists first) could keep cores the job no longer has.
            self._helper = ThreadPoolExecutor(1, thread_name_prefix="speechgate-lane")
            self._helper.submit(int).result()
        self.width = self._narrowest
        self.pairs = 0
        """How many pairs were spoken side by side (for tests and the curious)."""

    def set_width(self, threads: int) -> None:
        """Let the segments that follow compute with `threads` threads."""
        self.width = threads
        self._use_threads(threads)

    @property
    def open(self) -> bool:
        """Whether two segments may run side by side now: the engine can, and the job has
        exactly two narrow segments' worth of threads. Wider (more cores than two workers
        have), a pair would leave cores idle that one wide segment uses."""
        return self._side_by_side and self.width == 2 * self._narrowest

    def segments(
        self, parts: Sequence[SynthesisRequest], speak: Callable[[SynthesisRequest], Iterator[T]]
    ) -> Iterator[Iterator[T]]:
        """`speak(part)` for each of `parts`, in order: the first alone, then two at a time side
        by side while the lanes are open and the two are balanced (see `BALANCE`), else one at
        a time. Each iterator must be used up before the next is asked for."""
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
        """Both parts' chunks, spoken at once on the narrowest width; the engine is idle again
        when this returns or raises."""
        assert self._helper is not None  # started with the lanes of a `SideBySide` engine
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
