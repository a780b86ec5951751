"""Per-key limits, in memory: a token bucket, a concurrency cap, a monthly character quota.

Pure state machines over an injected clock; `redis_limiter` shares the decisions and headers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime


def month_bounds(now: datetime) -> tuple[datetime, datetime]:
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return start, end


def reset_duration(seconds: float) -> str:
    """Durations as OpenAI writes them in `x-ratelimit-reset-*`: "20ms", "1s", "6m0s"."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_after: float
    retry_after: float
    """Seconds until the next request would be allowed (0 when allowed now)."""

    def headers(self, unit: str) -> dict[str, str]:
        """OpenAI's `x-ratelimit-*-<unit>` headers ("requests" or "characters")."""
        return {
            f"x-ratelimit-limit-{unit}": str(self.limit),
            f"x-ratelimit-remaining-{unit}": str(self.remaining),
            f"x-ratelimit-reset-{unit}": reset_duration(self.reset_after),
        }


def bucket_burst(rate: float, burst: int | None) -> int:
    """A key's bucket size: its `burst`, or else one second's worth of its rate (at least 1)."""
    return burst or max(1, math.ceil(rate))


def bucket_decision(allowed: bool, tokens: float, rate: float, burst: int) -> Decision:
    return Decision(
        allowed=allowed,
        limit=burst,
        remaining=math.floor(tokens),
        reset_after=(burst - tokens) / rate,
        retry_after=0.0 if allowed else (1 - tokens) / rate,
    )


def quota_decision(allowed: bool, used: int, limit: int, now: datetime) -> Decision:
    _, month_end = month_bounds(now)
    until_reset = (month_end - now).total_seconds()
    return Decision(
        allowed=allowed,
        limit=limit,
        remaining=max(0, limit - used),
        reset_after=until_reset,
        retry_after=0.0 if allowed else until_reset,
    )


class TokenBucket:
    """`rate` requests per second on average, up to `burst` at once."""

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._updated = now

    def take(self, now: float) -> Decision:
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.rate)
        self._updated = now
        allowed = self._tokens >= 1
        if allowed:
            self._tokens -= 1
        return bucket_decision(allowed, self._tokens, self.rate, self.burst)


class Quota:
    """A key's characters in the current month: loaded once from the store, then counted here."""

    def __init__(self, month_start: datetime, used: int) -> None:
        self.month_start = month_start
        self.used = used

    def reserve(self, characters: int, limit: int, now: datetime) -> Decision:
        allowed = self.used + characters <= limit
        if allowed:
            self.used += characters
        return quota_decision(allowed, self.used, limit, now)

    def refund(self, characters: int, month_start: datetime) -> None:
        if month_start == self.month_start:
            self.used = max(0, self.used - characters)


@dataclass
class KeyState:
    bucket: TokenBucket | None = None
    in_flight: int = 0
    quota: Quota | None = None
