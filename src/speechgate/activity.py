"""The last few minutes of speech requests, in memory, for the live operator view.

Prometheus keeps the long history; this keeps just enough for `GET /v1/status` to draw
throughput and latency over recent minutes without a metrics stack.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

WINDOW_SECONDS = 300
BUCKET_SECONDS = 10
# Beyond this the oldest drop out early, which only shortens the window the figures cover.
_MAX_RECORDS = 10_000


@dataclass(frozen=True)
class Latency:
    """Milliseconds."""

    p50: float
    p95: float


@dataclass(frozen=True)
class Bucket:
    seconds_ago: int  # where the bucket starts, counted back from now
    requests: int
    incomplete: int
    audio_seconds: float
    time_to_first_audio_ms: Latency | None


@dataclass(frozen=True)
class Summary:
    window_seconds: int
    bucket_seconds: int
    requests: int
    incomplete: int
    audio_seconds: float
    time_to_first_audio_ms: Latency | None
    duration_ms: Latency | None
    buckets: list[Bucket]  # oldest first


def latency_ms(seconds: npt.NDArray[np.float64]) -> Latency | None:
    if not len(seconds):
        return None
    p50, p95 = np.percentile(seconds * 1000.0, [50, 95])
    return Latency(round(float(p50), 1), round(float(p95), 1))


class RecentRequests:
    """A bounded log of recent requests, none older than the window. Event loop only. A ring
    of columns allocated once, so recording allocates nothing: an object per request grows the
    gateway until the window fills, which a soak reads as a leak."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, capacity: int = _MAX_RECORDS
    ) -> None:
        self._clock = clock
        self._ended = np.zeros(capacity)  # the clock's reading when each request ended
        self._time_to_first_audio = np.zeros(capacity)
        self._elapsed = np.zeros(capacity)
        self._audio_seconds = np.zeros(capacity)
        self._completed = np.zeros(capacity, dtype=bool)  # False: failed, or the client left
        self._oldest = 0  # the oldest record's slot
        self._count = 0

    def record(
        self,
        time_to_first_audio: float,
        elapsed: float,
        audio_seconds: float,
        completed: bool,
    ) -> None:
        """One speech request that reached its first audio, when it ended."""
        now = self._clock()
        capacity = len(self._ended)
        if self._count == capacity:
            self._drop_oldest()
        slot = (self._oldest + self._count) % capacity
        self._ended[slot] = now
        self._time_to_first_audio[slot] = time_to_first_audio
        self._elapsed[slot] = elapsed
        self._audio_seconds[slot] = audio_seconds
        self._completed[slot] = completed
        self._count += 1
        # Here too, so the log holds the window's requests, not the last ones whenever they were.
        self._forget_before(now)

    def _forget_before(self, now: float) -> None:
        while self._count and now - self._ended[self._oldest] > WINDOW_SECONDS:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        self._oldest = (self._oldest + 1) % len(self._ended)
        self._count -= 1

    def __len__(self) -> int:
        return self._count

    def summary(self) -> Summary:
        now = self._clock()
        self._forget_before(now)
        slots = (self._oldest + np.arange(self._count)) % len(self._ended)
        ttfa = self._time_to_first_audio[slots]
        audio_seconds = self._audio_seconds[slots]
        completed = self._completed[slots]
        buckets = WINDOW_SECONDS // BUCKET_SECONDS
        ages = np.minimum((now - self._ended[slots]) // BUCKET_SECONDS, buckets - 1)
        summary_buckets = []
        for age in reversed(range(buckets)):
            inside = ages == age
            summary_buckets.append(
                Bucket(
                    seconds_ago=(age + 1) * BUCKET_SECONDS,
                    requests=int(inside.sum()),
                    incomplete=int((inside & ~completed).sum()),
                    audio_seconds=_rounded_sum(audio_seconds[inside]),
                    time_to_first_audio_ms=latency_ms(ttfa[inside]),
                )
            )
        return Summary(
            window_seconds=WINDOW_SECONDS,
            bucket_seconds=BUCKET_SECONDS,
            requests=self._count,
            incomplete=int((~completed).sum()),
            audio_seconds=_rounded_sum(audio_seconds),
            time_to_first_audio_ms=latency_ms(ttfa),
            duration_ms=latency_ms(self._elapsed[slots][completed]),
            buckets=summary_buckets,
        )


def _rounded_sum(seconds: npt.NDArray[np.float64]) -> float:
    return round(math.fsum(seconds), 3)
