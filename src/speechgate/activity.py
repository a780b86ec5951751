"""The last few minutes of speech requests, in memory, for the live operator view.

Prometheus keeps the long history; this keeps just enough for `GET /v1/status` to draw
throughput and latency over recent minutes without a metrics stack.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

WINDOW_SECONDS = 300
BUCKET_SECONDS = 10
# Enough for ~33 requests/s over the whole window; beyond that the oldest drop out early,
# which only shortens the window the figures cover.
_MAX_RECORDS = 10_000


@dataclass(frozen=True)
class RequestRecord:
    """One speech request that reached its first audio, recorded when it ended."""

    ended: float  # the clock's reading
    engine: str
    time_to_first_audio: float
    elapsed: float
    audio_seconds: float
    completed: bool  # False: it failed or the client left mid-stream


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


def latency_ms(seconds: Sequence[float]) -> Latency | None:
    if not seconds:
        return None
    p50, p95 = np.percentile(np.asarray(seconds, dtype=np.float64) * 1000.0, [50, 95])
    return Latency(round(float(p50), 1), round(float(p95), 1))


class RecentRequests:
    """A bounded log of recent requests. Used from the event loop only."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._records: deque[RequestRecord] = deque(maxlen=_MAX_RECORDS)

    def record(
        self,
        engine: str,
        time_to_first_audio: float,
        elapsed: float,
        audio_seconds: float,
        completed: bool,
    ) -> None:
        now = self._clock()
        self._records.append(
            RequestRecord(now, engine, time_to_first_audio, elapsed, audio_seconds, completed)
        )
        # Here too, not only when someone reads the summary: the log holds the window's
        # requests, not the last 10,000 whenever they were.
        self._forget_before(now)

    def _forget_before(self, now: float) -> None:
        while self._records and now - self._records[0].ended > WINDOW_SECONDS:
            self._records.popleft()

    def __len__(self) -> int:
        return len(self._records)

    def summary(self) -> Summary:
        now = self._clock()
        self._forget_before(now)
        records = list(self._records)
        slots: list[list[RequestRecord]] = [[] for _ in range(WINDOW_SECONDS // BUCKET_SECONDS)]
        for record in records:
            age = int((now - record.ended) // BUCKET_SECONDS)
            slots[min(age, len(slots) - 1)].append(record)
        buckets = [
            Bucket(
                seconds_ago=(age + 1) * BUCKET_SECONDS,
                requests=len(slot),
                incomplete=sum(not r.completed for r in slot),
                audio_seconds=round(sum(r.audio_seconds for r in slot), 3),
                time_to_first_audio_ms=latency_ms([r.time_to_first_audio for r in slot]),
            )
            for age, slot in reversed(list(enumerate(slots)))
        ]
        return Summary(
            window_seconds=WINDOW_SECONDS,
            bucket_seconds=BUCKET_SECONDS,
            requests=len(records),
            incomplete=sum(not r.completed for r in records),
            audio_seconds=round(sum(r.audio_seconds for r in records), 3),
            time_to_first_audio_ms=latency_ms([r.time_to_first_audio for r in records]),
            duration_ms=latency_ms([r.elapsed for r in records if r.completed]),
            buckets=buckets,
        )
