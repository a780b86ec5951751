"""A circuit breaker per provider: stop sending it requests while it is failing.

Closed: requests flow, and each outcome enters a sliding window. The breaker opens when the
window holds at least `min_requests` outcomes and either the error rate exceeds `error_rate`
or the p99 time to first audio of the successes exceeds `ttfa_p99`. Open: nothing is sent for
`open_for` seconds. Half-open: up to `probes` requests are let through at a time; `probes`
successes in a row close it (with an empty window), one failure opens it again.

Not thread-safe: one event loop owns it. The clock is injected, so tests never sleep.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class BreakerSettings(BaseModel):
    """The thresholds of one provider's breaker (a block of the routes file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    error_rate: float = Field(default=0.02, ge=0, le=1)
    """Open when more than this fraction of the window's requests failed."""
    window: float = Field(default=60.0, gt=0)
    """Seconds of outcomes the rates are computed over."""
    min_requests: int = Field(default=20, ge=1)
    """Outcomes the window must hold before it can open the breaker."""
    ttfa_p99: float | None = Field(default=None, gt=0)
    """Open when the p99 time to first audio of the window's successes exceeds this (seconds)."""
    open_for: float = Field(default=30.0, gt=0)
    """Seconds an open breaker sends nothing before it lets probes through."""
    probes: int = Field(default=3, ge=1)
    """Successful probes in a row that close a half-open breaker."""


class BreakerState(Enum):
    CLOSED = "closed"
    HALF_OPEN = "half_open"
    OPEN = "open"


class Outcome(Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"
    """Says nothing about the provider's health (a client error, a client that left)."""


@dataclass(frozen=True)
class _Event:
    at: float
    failed: bool
    ttfa: float | None


@dataclass(frozen=True)
class BreakerStatus:
    state: BreakerState
    requests: int
    failures: int
    ttfa_p99: float | None
    opened: int
    """Times this breaker has opened."""


class CircuitBreaker:
    def __init__(
        self, settings: BreakerSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._events: deque[_Event] = deque()
        self._failures = 0  # of the window's events, kept as they come and go
        self._state = BreakerState.CLOSED
        self._opened_at = 0.0
        self._probing = 0
        self._probe_successes = 0
        self._opened = 0

    @property
    def state(self) -> BreakerState:
        if self._state is BreakerState.OPEN and self._clock() >= (
            self._opened_at + self.settings.open_for
        ):
            self._state = BreakerState.HALF_OPEN
            self._probing = self._probe_successes = 0
        return self._state

    def allow(self) -> bool:
        """Whether a request may go to the provider now. In half-open, True takes a probe
        slot: the caller must `record` the request's outcome, whatever it is."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and self._probing < self.settings.probes:
            self._probing += 1
            return True
        return False

    def record(self, outcome: Outcome, ttfa: float | None = None) -> None:
        """The outcome of a request that `allow` let through."""
        if self._state is BreakerState.HALF_OPEN:
            self._probing = max(0, self._probing - 1)
            if outcome is Outcome.FAILURE:
                self._open()
            elif outcome is Outcome.SUCCESS:
                self._probe_successes += 1
                if self._probe_successes >= self.settings.probes:
                    self._state = BreakerState.CLOSED
                    self._events.clear()
                    self._failures = 0
            return
        if outcome is Outcome.NEUTRAL:
            return
        now = self._clock()
        self._events.append(_Event(now, outcome is Outcome.FAILURE, ttfa))
        self._failures += outcome is Outcome.FAILURE
        self._prune(now)
        if self._state is BreakerState.CLOSED and self._tripped():
            self._open()

    def status(self) -> BreakerStatus:
        state = self.state
        self._prune(self._clock())
        return BreakerStatus(
            state=state,
            requests=len(self._events),
            failures=self._failures,
            ttfa_p99=self._ttfa_p99(),
            opened=self._opened,
        )

    def _open(self) -> None:
        self._state = BreakerState.OPEN
        self._opened_at = self._clock()
        self._opened += 1

    def _prune(self, now: float) -> None:
        while self._events and self._events[0].at <= now - self.settings.window:
            self._failures -= self._events.popleft().failed

    def _tripped(self) -> bool:
        count = len(self._events)
        if count < self.settings.min_requests:
            return False
        if self._failures / count > self.settings.error_rate:
            return True
        # Sorting the window's times is the costly part of an outcome: only with a limit.
        limit = self.settings.ttfa_p99
        if limit is None:
            return False
        p99 = self._ttfa_p99()
        return p99 is not None and p99 > limit

    def _ttfa_p99(self) -> float | None:
        times = sorted(event.ttfa for event in self._events if event.ttfa is not None)
        if not times:
            return None
        # Nearest rank: the smallest time that at least 99 % of the successes do not exceed.
        return times[max(0, math.ceil(0.99 * len(times)) - 1)]
