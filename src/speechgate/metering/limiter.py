"""Who counts a key's limits: the `Limiter` boundary, and the in-memory limiter.

A limiter only counts (a key's token bucket, requests in flight, month's characters);
`Tenancy` decides who asks and how a refusal looks. `MemoryLimiter` counts in this process,
`RedisLimiter` for every gateway sharing `store.limits_url`.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from speechgate.metering.key_secrets import KeyLimits
from speechgate.metering.limits import (
    Decision,
    KeyState,
    Quota,
    TokenBucket,
    bucket_burst,
    month_bounds,
)

UsedSoFar = Callable[[str, datetime, datetime], Awaitable[int]]
"""`(key_id, start, end)` -> the key's billable characters in the store: a month's seed."""


@dataclass
class Hold:
    """What one admitted request holds until it ends: a slot and its reserved characters."""

    key_id: str
    month_start: datetime
    quota_limit: int | None
    """The key's monthly characters when it was admitted, if it has a quota."""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True)
class Verdict:
    """An admission's outcome: a `hold` when let in, else the limit that refused it; the
    decisions made on the way feed the headers either way."""

    hold: Hold | None
    requests: Decision | None = None
    characters: Decision | None = None
    concurrency_refused: bool = False


class Limiter(Protocol):
    """Counts per-key limits for the admissions of one gateway process."""

    async def admit(
        self, key_id: str, limits: KeyLimits, characters: int, now: datetime
    ) -> Verdict:
        """Take a token, a concurrency slot and `characters` of the month's quota, checked and
        counted at once, so concurrent admissions cannot both pass a limit only one fits. A
        token taken stays taken when the cap or the quota then refuses."""
        ...

    async def reserve(self, hold: Hold, characters: int, now: datetime) -> Decision | None:
        """Count `characters` more against an admitted request's quota, if allowed; None
        without a quota."""
        ...

    def release(self, hold: Hold, refund: int) -> None:
        """Free the slot and refund `refund` characters; returns at once and never raises."""
        ...

    async def settled(self, hold: Hold) -> None:
        """Wait until the release of `hold` has reached the shared state. Never raises."""
        ...

    def in_flight(self, key_id: str) -> int:
        """This process's requests of the key that hold a slot."""
        ...

    async def close(self) -> None: ...


class MemoryLimiter:
    """The limits of each key, counted in this process: several gateways each count their own."""

    def __init__(self, clock: Callable[[], float], used: UsedSoFar) -> None:
        self.clock = clock
        self.used = used
        self._states: dict[str, tuple[KeyLimits, KeyState]] = {}

    async def admit(
        self, key_id: str, limits: KeyLimits, characters: int, now: datetime
    ) -> Verdict:
        month_start, month_end = month_bounds(now)
        state = self._state(key_id, limits)
        quota = None
        if limits.monthly_characters is not None:
            quota = await self._quota(key_id, state, month_start, month_end)
        # Nothing awaits from here on, so concurrent requests cannot both pass a limit.
        requests = None
        if state.bucket is not None:
            requests = state.bucket.take(self.clock())
            if not requests.allowed:
                return Verdict(None, requests)
        if limits.max_concurrent is not None and state.in_flight >= limits.max_concurrent:
            return Verdict(None, requests, concurrency_refused=True)
        characters_decision = None
        if quota is not None and limits.monthly_characters is not None:
            characters_decision = quota.reserve(characters, limits.monthly_characters, now)
            if not characters_decision.allowed:
                return Verdict(None, requests, characters_decision)
        state.in_flight += 1
        hold = Hold(key_id, month_start, limits.monthly_characters)
        return Verdict(hold, requests, characters_decision)

    async def reserve(self, hold: Hold, characters: int, now: datetime) -> Decision | None:
        known = self._states.get(hold.key_id)
        quota = known[1].quota if known is not None else None
        if quota is None or hold.quota_limit is None:
            return None
        return quota.reserve(characters, hold.quota_limit, now)

    def release(self, hold: Hold, refund: int) -> None:
        # The state now, not at admission: a change of limits made a new one, slot carried over.
        state = self._states[hold.key_id][1]
        state.in_flight = max(0, state.in_flight - 1)
        if refund and state.quota is not None:
            state.quota.refund(refund, hold.month_start)

    async def settled(self, hold: Hold) -> None:
        return  # released in this process's own state, at once

    def in_flight(self, key_id: str) -> int:
        known = self._states.get(key_id)
        return known[1].in_flight if known is not None else 0

    async def close(self) -> None:
        pass

    def _state(self, key_id: str, limits: KeyLimits) -> KeyState:
        known = self._states.get(key_id)
        if known is not None and known[0] == limits:
            return known[1]
        state = KeyState(in_flight=known[1].in_flight if known else 0)
        if known is not None:
            state.quota = known[1].quota
        rate = limits.requests_per_second
        if rate is not None:
            state.bucket = TokenBucket(rate, bucket_burst(rate, limits.burst), self.clock())
        self._states[key_id] = (limits, state)
        return state

    async def _quota(
        self, key_id: str, state: KeyState, month_start: datetime, month_end: datetime
    ) -> Quota:
        if state.quota is None or state.quota.month_start != month_start:
            used = await self.used(key_id, month_start, month_end)
            # Another request may have loaded it while this one waited for the store.
            if state.quota is None or state.quota.month_start != month_start:
                state.quota = Quota(month_start, used)
        return state.quota
