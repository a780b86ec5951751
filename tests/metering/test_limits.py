"""Token bucket, quota and month arithmetic, on a clock the test moves."""

from __future__ import annotations

from datetime import datetime

import pytest

from speechgate.metering.limits import Quota, TokenBucket, month_bounds, reset_duration


def test_bucket_allows_a_burst_then_refills_at_its_rate() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=100.0)
    decisions = [bucket.take(100.0) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0]
    refused = decisions[-1]
    assert refused.retry_after == pytest.approx(0.5)
    assert refused.reset_after == pytest.approx(1.5)
    assert not bucket.take(100.4).allowed
    assert bucket.take(100.5).allowed
    # Long idle refills to the burst, not beyond.
    later = [bucket.take(1000.0) for _ in range(4)]
    assert [d.allowed for d in later] == [True, True, True, False]


def test_quota_reserves_refunds_and_refuses() -> None:
    now = datetime(2026, 2, 27, 12)
    start, end = month_bounds(now)
    quota = Quota(start, used=90)
    assert quota.reserve(10, 100, now).allowed
    refused = quota.reserve(1, 100, now)
    assert not refused.allowed and refused.remaining == 0
    assert refused.retry_after == (end - now).total_seconds()
    quota.refund(10, start)
    assert quota.reserve(10, 100, now).allowed
    # A refund for last month's request does not touch this month.
    quota.refund(10, datetime(2026, 1, 1))
    assert quota.used == 100


@pytest.mark.parametrize(
    ("now", "start", "end"),
    [
        (datetime(2026, 1, 31, 23, 59), datetime(2026, 1, 1), datetime(2026, 2, 1)),
        (datetime(2026, 12, 1), datetime(2026, 12, 1), datetime(2027, 1, 1)),
        (datetime(2028, 2, 29, 5), datetime(2028, 2, 1), datetime(2028, 3, 1)),
    ],
)
def test_month_bounds(now: datetime, start: datetime, end: datetime) -> None:
    assert month_bounds(now) == (start, end)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0201, "21ms"), (0.0, "0ms"), (1.0, "1s"), (59.2, "1m0s"), (360, "6m0s"), (3725, "1h2m5s")],
)
def test_reset_durations_read_like_openais(seconds: float, text: str) -> None:
    assert reset_duration(seconds) == text
