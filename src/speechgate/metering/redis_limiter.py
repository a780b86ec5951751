"""Per-key limits kept in Redis, shared by every gateway pointed at it (`store.limits_url`).

One Lua script round trip admits a request atomically, on Redis' own clock (`TIME`), so
gateways agree without synchronised clocks. Keys are `speechgate:{<key id>}:...` (the braces
keep a key's state in one Cluster slot, as a script needs):

- `bucket:<rate>:<burst>`: the token bucket. Its name holds the limits, so gateways that still
  see old limits (up to `auth.key_cache_ttl`) count in the old bucket rather than reset the new one.
- `leases`: requests in flight, scored by lease expiry; renewed every `lease / 3`, so a dead
  gateway's slots come back within `lease`.
- `quota:<YYYY-MM>`: the month's characters, seeded once from the store (SET NX).

If Redis cannot be reached, keyed requests get 503 `limits_unavailable` rather than go
unlimited: a key's limits are a promise a gateway cannot keep alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, ReadOnlyError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from speechgate.errors import LimitsUnavailable
from speechgate.metering.key_secrets import KeyLimits
from speechgate.metering.limiter import Hold, UsedSoFar, Verdict
from speechgate.metering.limits import (
    Decision,
    bucket_burst,
    bucket_decision,
    month_bounds,
    quota_decision,
)

log = logging.getLogger(__name__)

_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, InvalidResponse, ReadOnlyError)
"""What says the store cannot be used now (down, slow, not Redis, a read-only replica), rather
than that a script is wrong."""

LEASE_SECONDS = 15.0
"""How long a slot is held without renewal; renewed every third of it, so a renewal can be
missed twice before a live request loses its slot."""

QUOTA_KEPT_SECONDS = 86400
"""How long a quota counter outlives its month, for refunds of requests that straddle it."""

# Fail fast when Redis is down: never a request hanging on it.
_TIMEOUT = 2.0
_RETRY = Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.1), retries=1)

# Now, in seconds: the caller's clock when it passes one (tests), else Redis' own.
_NOW = """
local now = tonumber(ARGV[1])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) + tonumber(time[2]) / 1000000
end
local function seconds(value) return string.format('%.6f', value) end
local function milliseconds(value) return string.format('%d', math.ceil(value * 1000)) end
"""

# Without a seed the script stops before counting and the caller comes back with one.
_SEED = """
local function seeded(key, seed, ttl)
  if redis.call('EXISTS', key) == 1 then return true end
  if seed == '' then return false end
  redis.call('SET', key, seed, 'NX', 'EX', ttl)
  return true
end
"""

# KEYS: bucket, leases, quota. ARGV: now ('' = Redis' clock), rate (0: none), burst,
# cap (-1: none), lease seconds, admission id, characters, quota limit (-1: none),
# quota seed ('' = not read yet), quota ttl.
# Returns {outcome, tokens left, characters used}; outcome is ok, rate, busy, quota or seed.
_ADMIT = (
    _NOW
    + _SEED
    + """
local rate, burst, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lease, id, characters = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local limit = tonumber(ARGV[8])
if limit >= 0 and not seeded(KEYS[3], ARGV[9], ARGV[10]) then return {'seed', '0', 0} end

local tokens = '0'
if rate > 0 then
  local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
  local left = tonumber(state[1]) or burst
  local at = tonumber(state[2]) or now
  left = math.min(burst, left + math.max(0, now - at) * rate)
  local allowed = left >= 1
  if allowed then left = left - 1 end
  tokens = string.format('%.17g', left)
  redis.call('HSET', KEYS[1], 'tokens', tokens, 'at', seconds(now))
  -- Gone once it would be full again: a missing bucket is a full one.
  redis.call('PEXPIRE', KEYS[1], milliseconds((burst - left) / rate + 1))
  if not allowed then return {'rate', tokens, 0} end
end

redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', seconds(now))
if cap >= 0 and redis.call('ZCARD', KEYS[2]) >= cap then return {'busy', tokens, 0} end

local used = 0
if limit >= 0 then
  used = tonumber(redis.call('GET', KEYS[3]))
  if used + characters > limit then return {'quota', tokens, used} end
  used = redis.call('INCRBY', KEYS[3], characters)
end

redis.call('ZADD', KEYS[2], seconds(now + lease), id)
redis.call('PEXPIRE', KEYS[2], milliseconds(lease + 1))
return {'ok', tokens, used}
"""
)

# KEYS: quota. ARGV: characters, limit, quota seed ('' = not read yet), quota ttl.
# Returns {outcome, characters used}; outcome is ok, quota or seed.
_RESERVE = (
    _SEED
    + """
local characters, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
if not seeded(KEYS[1], ARGV[3], ARGV[4]) then return {'seed', 0} end
local used = tonumber(redis.call('GET', KEYS[1]))
if used + characters > limit then return {'quota', used} end
return {'ok', redis.call('INCRBY', KEYS[1], characters)}
"""
)

# KEYS: leases, quota. ARGV: admission id, characters to refund.
_RELEASE = """
redis.call('ZREM', KEYS[1], ARGV[1])
local refund = tonumber(ARGV[2])
if refund > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  if redis.call('DECRBY', KEYS[2], refund) < 0 then redis.call('SET', KEYS[2], 0, 'KEEPTTL') end
end
return 1
"""

# KEYS: leases. ARGV: now, lease seconds, admission ids. XX: a lease released (or expired and
# dropped) meanwhile is not brought back.
_RENEW = (
    _NOW
    + """
local lease = tonumber(ARGV[2])
for i = 3, #ARGV do redis.call('ZADD', KEYS[1], 'XX', seconds(now + lease), ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], milliseconds(lease + 1))
return 1
"""
)


def _bucket_key(key_id: str, rate: float, burst: int) -> str:
    return f"speechgate:{{{key_id}}}:bucket:{rate!r}:{burst}"


def _leases_key(key_id: str) -> str:
    return f"speechgate:{{{key_id}}}:leases"


def _quota_key(key_id: str, month_start: datetime) -> str:
    return f"speechgate:{{{key_id}}}:quota:{month_start:%Y-%m}"


def _quota_ttl(month_start: datetime, now: datetime) -> int:
    _, month_end = month_bounds(month_start)
    return max(0, math.ceil((month_end - now).total_seconds())) + QUOTA_KEPT_SECONDS


class RedisLimiter:
    """Limits counted in Redis, for any number of gateways. `used` seeds a month's quota from
    the store; `clock` replaces Redis' clock for tests."""

    def __init__(
        self,
        client: Redis,
        used: UsedSoFar,
        *,
        lease: float = LEASE_SECONDS,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.client = client
        self.used = used
        self.lease = lease
        self.clock = clock
        self._admit: AsyncScript = client.register_script(_ADMIT)
        self._reserve: AsyncScript = client.register_script(_RESERVE)
        self._release: AsyncScript = client.register_script(_RELEASE)
        self._renew: AsyncScript = client.register_script(_RENEW)
        self._live: dict[str, Hold] = {}
        """The leases to renew."""
        self._ending: dict[str, tuple[Hold, asyncio.Task[None]]] = {}
        self._renewer: asyncio.Task[None] | None = None

    @classmethod
    async def connect(
        cls,
        url: str,
        used: UsedSoFar,
        *,
        lease: float = LEASE_SECONDS,
        clock: Callable[[], float] | None = None,
    ) -> RedisLimiter:
        """A limiter on the Redis at `url`; Redis being down gives 503s, not a failed start."""
        client = Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=_TIMEOUT,
            socket_timeout=_TIMEOUT,
            retry=_RETRY,
        )
        limiter = cls(client, used, lease=lease, clock=clock)
        try:
            await client.ping()
        except RedisError as error:
            log.warning("The rate-limit store (limits_url) is not reachable yet: %s", error)
        limiter.start()
        return limiter

    def start(self) -> None:
        if self._renewer is None:
            self._renewer = asyncio.create_task(self._renew_forever(), name="lease-renewal")

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer
        await asyncio.gather(*(task for _, task in self._ending.values()), return_exceptions=True)
        await self.client.aclose()

    # --- the Limiter protocol -------------------------------------------------------------

    async def admit(
        self, key_id: str, limits: KeyLimits, characters: int, now: datetime
    ) -> Verdict:
        month_start, _ = month_bounds(now)
        hold = Hold(key_id, month_start, limits.monthly_characters)
        rate, cap, quota = limits.requests_per_second, limits.max_concurrent, hold.quota_limit
        if rate is None and cap is None and quota is None:
            return Verdict(hold)
        burst = bucket_burst(rate, limits.burst) if rate is not None else 0
        keys = [
            _bucket_key(key_id, rate or 0.0, burst),
            _leases_key(key_id),
            _quota_key(key_id, month_start),
        ]

        async def run(seed: str) -> list[Any]:
            args: list[str | int | float] = [
                self._now(),
                rate or 0,
                burst,
                -1 if cap is None else cap,
                self.lease,
                hold.id,
                characters,
                -1 if quota is None else quota,
                seed,
                _quota_ttl(month_start, now),
            ]
            reply: list[Any] = await self._call(self._admit, keys, args)
            return reply

        outcome, tokens, used = await run("")
        if outcome == "seed":
            outcome, tokens, used = await run(str(await self._seed(key_id, month_start)))
        requests = None
        if rate is not None:
            requests = bucket_decision(outcome != "rate", float(tokens), rate, burst)
        if outcome in ("rate", "busy"):
            return Verdict(None, requests, concurrency_refused=outcome == "busy")
        characters_decision = None
        if quota is not None:
            characters_decision = quota_decision(outcome != "quota", int(used), quota, now)
        if outcome == "quota":
            return Verdict(None, requests, characters_decision)
        self._live[hold.id] = hold
        return Verdict(hold, requests, characters_decision)

    async def reserve(self, hold: Hold, characters: int, now: datetime) -> Decision | None:
        limit = hold.quota_limit
        if limit is None:
            return None
        keys = [_quota_key(hold.key_id, hold.month_start)]
        ttl = _quota_ttl(hold.month_start, now)
        outcome, used = await self._call(self._reserve, keys, [characters, limit, "", ttl])
        if outcome == "seed":
            seed = await self._seed(hold.key_id, hold.month_start)
            outcome, used = await self._call(self._reserve, keys, [characters, limit, seed, ttl])
        return quota_decision(outcome == "ok", int(used), limit, now)

    def release(self, hold: Hold, refund: int) -> None:
        if self._live.pop(hold.id, None) is None:
            return  # never leased, or released already
        task = asyncio.create_task(self._free(hold, refund))
        self._ending[hold.id] = hold, task

    async def settled(self, hold: Hold) -> None:
        if (ending := self._ending.get(hold.id)) is not None:
            # Shielded: a request cancelled while it waits still frees its slot.
            await asyncio.shield(ending[1])

    def in_flight(self, key_id: str) -> int:
        holds = [*self._live.values(), *(hold for hold, _ in self._ending.values())]
        return sum(hold.key_id == key_id for hold in holds)

    # --- leases ---------------------------------------------------------------------------

    async def renew(self) -> None:
        """Push this process's live leases `lease` seconds ahead, in one round trip."""
        ids: defaultdict[str, list[str]] = defaultdict(list)
        for hold in self._live.values():
            ids[hold.key_id].append(hold.id)
        if not ids:
            return
        async with self.client.pipeline(transaction=False) as pipe:
            for key_id, leases in ids.items():
                args: list[str | int | float] = [self._now(), self.lease, *leases]
                await self._renew(keys=[_leases_key(key_id)], args=args, client=pipe)
            await pipe.execute()

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                await self.renew()
            except RedisError as error:
                log.warning("Could not renew concurrency leases in Redis: %s", error)

    async def _free(self, hold: Hold, refund: int) -> None:
        keys = [_leases_key(hold.key_id), _quota_key(hold.key_id, hold.month_start)]
        try:
            await self._release(keys=keys, args=[hold.id, refund])
        except RedisError as error:
            log.warning(
                "Could not release a request of key %s in Redis (%s): its slot frees itself "
                "within %g s; %d characters were not refunded.",
                hold.key_id,
                error,
                self.lease,
                refund,
            )
        finally:
            self._ending.pop(hold.id, None)

    # --- helpers --------------------------------------------------------------------------

    def _now(self) -> str:
        return "" if self.clock is None else repr(self.clock())

    async def _seed(self, key_id: str, month_start: datetime) -> int:
        _, month_end = month_bounds(month_start)
        return await self.used(key_id, month_start, month_end)

    async def _call(
        self, script: AsyncScript, keys: list[str], args: list[str | int | float]
    ) -> Any:
        try:
            return await script(keys=keys, args=args)
        except _UNAVAILABLE as error:
            log.warning("The rate-limit store (limits_url) cannot be used: %s", error)
            raise LimitsUnavailable() from error
