"""An engine for tests of segments spoken side by side (`speechgate.lanes`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import SynthesisRequest, Voice

# Four segments: a short first one, then three sentences (the first two of equal length).
TEXT = "Hi there. Aaaa bbbb cccc. Dddd eeee ffff. Gggg hhhh iiii."
PAIR = frozenset({"Aaaa bbbb cccc.", "Dddd eeee ffff."})


class Recorder:
    """A `SideBySide` engine that notes, for every call, its text, its width and how many calls
    ran at once; each call waits for a second one at `meet` (a barrier) when told to, so two
    calls that do not overlap fail instead of passing by luck."""

    name = "recorder"
    sample_rate = 16000
    supports_instructions = supports_seed = blends_voices = phonemes = False
    side_by_side = True

    def __init__(self, meet: frozenset[str] = frozenset(), fail_on: str | None = None) -> None:
        self.width = 1
        self.calls: list[tuple[str, int, int]] = []  # text, width, calls running then
        self._running = 0
        self._lock = threading.Lock()
        self._meet = meet
        self._barrier = threading.Barrier(2, timeout=10)
        self._fail_on = fail_on

    def voices(self) -> list[Voice]:
        return [Voice("v", "v")]

    def use_threads(self, threads: int) -> None:
        self.width = threads

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        with self._lock:
            self._running += 1
            self.calls.append((request.text, self.width, self._running))
        try:
            if request.text in self._meet:
                self._barrier.wait()
            if request.text == self._fail_on:
                raise RuntimeError("told to fail")
            # A tone as long as the text, in the text's own pitch: each segment is told apart.
            seconds = 0.01 * len(request.text)
            t = np.arange(round(seconds * self.sample_rate)) / self.sample_rate
            tone = 0.3 * np.sin(2 * np.pi * (100 + len(request.text)) * t)
            yield PcmChunk.from_float(tone, self.sample_rate)
        finally:
            with self._lock:
                self._running -= 1

    def close(self) -> None:
        pass
