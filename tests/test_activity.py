"""The in-memory log of recent requests behind the live operator view."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from speechgate import activity
from speechgate.activity import BUCKET_SECONDS, WINDOW_SECONDS, Latency, RecentRequests


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_no_requests_yet() -> None:
    summary = RecentRequests(Clock()).summary()
    assert (summary.requests, summary.incomplete, summary.audio_seconds) == (0, 0, 0.0)
    assert summary.time_to_first_audio_ms is None
    assert summary.duration_ms is None
    assert [b.seconds_ago for b in summary.buckets] == list(
        range(WINDOW_SECONDS, 0, -BUCKET_SECONDS)
    )
    assert all(b.requests == 0 and b.time_to_first_audio_ms is None for b in summary.buckets)


def test_requests_land_in_the_bucket_of_their_age() -> None:
    clock = Clock()
    recent = RecentRequests(clock)
    recent.record(0.1, 1.0, 3.0, completed=True)
    clock.now += 25  # that one is now 25 s old: in the bucket that starts 30 s ago
    recent.record(0.3, 2.0, 4.0, completed=True)
    recent.record(0.2, 0.5, 0.5, completed=False)
    summary = recent.summary()

    newest, older = summary.buckets[-1], summary.buckets[-3]
    assert (newest.seconds_ago, newest.requests, newest.incomplete) == (10, 2, 1)
    assert newest.audio_seconds == pytest.approx(4.5)
    assert newest.time_to_first_audio_ms == Latency(250.0, 295.0)
    assert (older.seconds_ago, older.requests, older.audio_seconds) == (30, 1, 3.0)
    assert sum(b.requests for b in summary.buckets) == summary.requests == 3
    assert summary.incomplete == 1
    assert summary.audio_seconds == pytest.approx(7.5)
    assert summary.time_to_first_audio_ms == Latency(200.0, 290.0)
    # Only requests that ran to the end say how long a request takes.
    assert summary.duration_ms == Latency(1500.0, 1950.0)


def test_requests_older_than_the_window_drop_out() -> None:
    clock = Clock()
    recent = RecentRequests(clock)
    recent.record(0.1, 1.0, 3.0, completed=True)
    clock.now += WINDOW_SECONDS
    assert recent.summary().buckets[0].requests == 1  # the oldest bucket, still in the window
    clock.now += 0.5
    recent.record(0.2, 1.0, 2.0, completed=True)
    summary = recent.summary()
    assert summary.requests == 1
    assert summary.audio_seconds == 2.0


def test_the_log_holds_the_window_even_when_nobody_reads_it() -> None:
    clock = Clock()
    recent = RecentRequests(clock)
    for _ in range(3 * WINDOW_SECONDS):  # one request a second, the summary never asked for
        recent.record(0.1, 0.5, 1.0, completed=True)
        clock.now += 1.0
    assert len(recent) == WINDOW_SECONDS + 1


def test_recording_allocates_nothing_per_request() -> None:
    # The soak's budget is 0.1 KB of gateway memory per request; a log that kept an object per
    # request (~250 bytes) spent more than twice that on its own until the window was full.
    # Only what the log's own code allocates is counted: a test process's other threads (a
    # server another module left running) allocate meanwhile.
    clock = Clock()
    recent = RecentRequests(clock)
    own_code = [tracemalloc.Filter(True, activity.__file__, all_frames=True)]

    def allocated() -> int:
        gc.collect()
        snapshot = tracemalloc.take_snapshot().filter_traces(own_code)
        return sum(stat.size for stat in snapshot.statistics("filename"))

    # What the process holds already is set aside, so that each collection walks only what
    # was allocated since, not every module a test process has imported. For good: unfrozen,
    # it would include what the test process froze after collecting (tests/conftest.py).
    gc.collect()
    gc.freeze()
    tracemalloc.start(10)
    try:
        for _ in range(100):  # anything allocated once, on first use
            recent.record(0.1, 0.5, 1.0, completed=True)
        before = allocated()
        for _ in range(5000):  # all inside the window: none drops out
            clock.now += 0.01
            recent.record(0.1, 0.5, 1.0, completed=True)
        after = allocated()
    finally:
        tracemalloc.stop()
    assert len(recent) == 5100
    assert after - before < 16 * 1024


def test_the_log_keeps_the_newest_when_full() -> None:
    clock = Clock()
    recent = RecentRequests(clock, capacity=3)
    for audio_seconds in (1.0, 2.0, 3.0, 4.0, 5.0):
        recent.record(0.1, 0.5, audio_seconds, completed=True)
        clock.now += 1.0
    assert len(recent) == 3
    assert recent.summary().audio_seconds == 12.0
