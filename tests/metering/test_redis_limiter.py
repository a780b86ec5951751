"""Per-key limits in a real Redis server, shared by several limiters as by several gateways.

Most tests drive the scripts with a clock the test moves (the `clock` option); one runs on
Redis' own clock. Each test uses keys of its own, so they share one server.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from redis.asyncio import Redis

from speechgate.errors import LimitsUnavailable
from speechgate.metering.key_secrets import KeyLimits
from speechgate.metering.limiter import Hold, Verdict
from speechgate.metering.limits import Decision
from speechgate.metering.redis_limiter import RedisLimiter
from tests.helpers.server import refusing_port
from tests.helpers.waiting import until

NOW = datetime(2026, 3, 14, 12, 0)


class Clock:
    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds


@dataclass
class Usage:
    """The store's side of a quota: characters used per (key, month start), and who asked."""

    used: dict[tuple[str, datetime], int] = field(default_factory=dict)
    asked: list[tuple[str, datetime]] = field(default_factory=list)

    async def __call__(self, key_id: str, start: datetime, end: datetime) -> int:
        assert end > start
        self.asked.append((key_id, start))
        return self.used.get((key_id, start), 0)


def new_key() -> str:
    return f"key_{uuid.uuid4().hex[:12]}"


@asynccontextmanager
async def gateways(
    url: str, count: int = 2, usage: Usage | None = None, **options: Any
) -> AsyncIterator[list[RedisLimiter]]:
    """`count` limiters on one Redis, each with its own connections, as separate gateways."""
    async with AsyncExitStack() as stack:
        limiters = []
        for _ in range(count):
            limiter = RedisLimiter(
                Redis.from_url(url, decode_responses=True), usage or Usage(), **options
            )
            stack.push_async_callback(limiter.close)
            limiters.append(limiter)
        yield limiters


def run(scenario: Callable[[], Any]) -> None:
    asyncio.run(scenario())


def held(verdict: Verdict) -> Hold:
    assert verdict.hold is not None, verdict
    return verdict.hold


def quota_refused(verdict: Verdict) -> bool:
    return verdict.hold is None and verdict.characters is not None


def allows(decision: Decision | None) -> bool:
    assert decision is not None
    return decision.allowed


def test_a_burst_then_refusal_with_retry_after_then_refill(redis_server: str) -> None:
    clock = Clock()
    key, limits = new_key(), KeyLimits(requests_per_second=2, burst=3)

    async def scenario() -> None:
        async with gateways(redis_server, 1, clock=clock) as [gateway]:
            verdicts = [await gateway.admit(key, limits, 1, NOW) for _ in range(4)]
            decisions = [verdict.requests for verdict in verdicts]
            assert [d.allowed for d in decisions if d] == [True, True, True, False]
            assert [d.remaining for d in decisions if d] == [2, 1, 0, 0]
            refused = verdicts[-1]
            assert refused.hold is None and refused.requests is not None
            assert refused.requests.retry_after == pytest.approx(0.5)
            assert refused.requests.reset_after == pytest.approx(1.5)
            assert refused.requests.headers("requests") == {
                "x-ratelimit-limit-requests": "3",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "2s",
            }
            clock.seconds += 0.4
            assert (await gateway.admit(key, limits, 1, NOW)).hold is None
            clock.seconds += 0.1
            assert (await gateway.admit(key, limits, 1, NOW)).hold is not None
            # Long idle refills to the burst, not beyond.
            clock.seconds += 1000
            later = [await gateway.admit(key, limits, 1, NOW) for _ in range(4)]
            assert [verdict.hold is not None for verdict in later] == [True, True, True, False]

    run(scenario)


def test_the_bucket_runs_on_redis_clock(redis_server: str) -> None:
    key, limits = new_key(), KeyLimits(requests_per_second=0.001, burst=3)

    async def scenario() -> None:
        async with gateways(redis_server, 1) as [gateway]:
            verdicts = [await gateway.admit(key, limits, 1, NOW) for _ in range(4)]
            assert [verdict.hold is not None for verdict in verdicts] == [True, True, True, False]
            refused = verdicts[-1].requests
            assert refused is not None
            # One token takes 1000 s; a few of them have passed since the burst.
            assert 990 < refused.retry_after <= 1000

    run(scenario)


def test_two_gateways_share_one_keys_bucket(redis_server: str) -> None:
    key, limits = new_key(), KeyLimits(requests_per_second=0.001, burst=3)

    async def scenario() -> None:
        async with gateways(redis_server) as [first, second]:
            admitted = [
                (await gateway.admit(key, limits, 1, NOW)).hold is not None
                for gateway in [first, second] * 4
            ]
            assert admitted == [True, True, True, False, False, False, False, False]

    run(scenario)


def test_changed_limits_start_a_fresh_bucket(redis_server: str) -> None:
    clock = Clock()
    key = new_key()
    before = KeyLimits(requests_per_second=1, burst=1)

    async def scenario() -> None:
        async with gateways(redis_server, clock=clock) as [first, second]:
            assert (await first.admit(key, before, 1, NOW)).hold is not None
            assert (await second.admit(key, before, 1, NOW)).hold is None
            # Same burst, another rate: another bucket, full.
            changed = KeyLimits(requests_per_second=2, burst=1)
            assert (await second.admit(key, changed, 1, NOW)).hold is not None
            # A gateway still seeing the old limits counts in the old bucket: no reset.
            assert (await first.admit(key, before, 1, NOW)).hold is None
            # Another burst, same rate: another bucket too. Limits that are not the bucket's
            # (the cap, say) leave it as it is.
            assert (await first.admit(key, KeyLimits(requests_per_second=1, burst=2), 1, NOW)).hold
            capped = KeyLimits(requests_per_second=1, burst=1, max_concurrent=5)
            assert (await first.admit(key, capped, 1, NOW)).hold is None

    run(scenario)


def test_concurrency_cap_across_gateways_and_release(redis_server: str) -> None:
    key, limits = new_key(), KeyLimits(max_concurrent=2)

    async def scenario() -> None:
        async with gateways(redis_server) as [first, second]:
            one = held(await first.admit(key, limits, 1, NOW))
            held(await second.admit(key, limits, 1, NOW))
            refused = await first.admit(key, limits, 1, NOW)
            assert refused.hold is None and refused.concurrency_refused
            assert (first.in_flight(key), second.in_flight(key)) == (1, 1)
            first.release(one, 0)
            first.release(one, 0)  # twice is once
            await until(lambda: first.in_flight(key) == 0)
            held(await second.admit(key, limits, 1, NOW))
            assert (await first.admit(key, limits, 1, NOW)).concurrency_refused

    run(scenario)


def test_settled_waits_until_every_gateway_sees_the_slot_free(redis_server: str) -> None:
    key, limits = new_key(), KeyLimits(max_concurrent=1)

    async def scenario() -> None:
        async with gateways(redis_server) as [first, second]:
            hold = held(await first.admit(key, limits, 1, NOW))
            assert (await second.admit(key, limits, 1, NOW)).concurrency_refused
            first.release(hold, 0)
            await first.settled(hold)
            assert first.in_flight(key) == 0
            # No waiting here: the other gateway's very next admission gets the slot.
            held(await second.admit(key, limits, 1, NOW))
            await first.settled(hold)  # once settled, at once

    run(scenario)


def test_a_dead_gateways_slots_expire_with_their_leases(redis_server: str) -> None:
    clock = Clock()
    key, limits = new_key(), KeyLimits(max_concurrent=1)

    async def scenario() -> None:
        async with gateways(redis_server, 3, lease=10.0, clock=clock) as [dead, live, other]:
            held(await dead.admit(key, limits, 1, NOW))
            assert (await other.admit(key, limits, 1, NOW)).concurrency_refused
            clock.seconds += 9.9
            assert (await other.admit(key, limits, 1, NOW)).concurrency_refused
            # The dead gateway never renewed: its slot is free once the lease runs out.
            clock.seconds += 0.1
            held(await live.admit(key, limits, 1, NOW))
            # A live gateway renews its leases and keeps its slot past the first lease.
            for _ in range(3):
                clock.seconds += 9
                await live.renew()
                assert (await other.admit(key, limits, 1, NOW)).concurrency_refused
            clock.seconds += 10
            held(await other.admit(key, limits, 1, NOW))

    run(scenario)


def test_a_released_lease_is_not_renewed_back(redis_server: str) -> None:
    clock = Clock()
    key, limits = new_key(), KeyLimits(max_concurrent=1)

    async def scenario() -> None:
        async with gateways(redis_server, lease=10.0, clock=clock) as [first, second]:
            hold = held(await first.admit(key, limits, 1, NOW))
            first.release(hold, 0)
            await first.renew()
            await until(lambda: first.in_flight(key) == 0)
            await first.renew()
            held(await second.admit(key, limits, 1, NOW))

    run(scenario)


def test_quota_is_seeded_once_from_the_store_then_shared(redis_server: str) -> None:
    key, limits = new_key(), KeyLimits(monthly_characters=100)
    march, april = datetime(2026, 3, 1), datetime(2026, 4, 1)
    usage = Usage({(key, march): 60})

    async def scenario() -> None:
        async with gateways(redis_server, usage=usage) as [first, second]:
            admitted = await first.admit(key, limits, 30, NOW)
            assert admitted.characters is not None
            assert admitted.characters.headers("characters") == {
                "x-ratelimit-limit-characters": "100",
                "x-ratelimit-remaining-characters": "10",
                "x-ratelimit-reset-characters": "420h0m0s",  # until April
            }
            refused = await second.admit(key, limits, 11, NOW)
            assert refused.hold is None and refused.characters is not None
            assert not refused.characters.allowed and refused.characters.remaining == 10
            assert refused.characters.retry_after == (april - NOW).total_seconds()
            assert usage.asked == [(key, march)]  # the second gateway found it seeded
            # Not billable (nothing spoken): its characters come back, for every gateway.
            first.release(held(admitted), 30)
            await until(lambda: first.in_flight(key) == 0)
            last = held(await second.admit(key, limits, 40, NOW))
            assert quota_refused(await first.admit(key, limits, 1, NOW))
            # A new month starts from the store's count for it (none yet).
            in_april = datetime(2026, 4, 1, 0, 5)
            assert (await first.admit(key, limits, 100, in_april)).hold is not None
            assert usage.asked == [(key, march), (key, april)]
            # A refund for March's request leaves April alone.
            second.release(last, 40)
            await until(lambda: second.in_flight(key) == 0)
            assert quota_refused(await second.admit(key, limits, 1, in_april))

    run(scenario)


def test_a_session_reserves_more_as_it_goes(redis_server: str) -> None:
    key, limits = new_key(), KeyLimits(monthly_characters=50)

    async def scenario() -> None:
        async with gateways(redis_server) as [first, second]:
            session = held(await first.admit(key, limits, 0, NOW))
            allowed = await first.reserve(session, 30, NOW)
            assert allowed is not None and allowed.allowed and allowed.remaining == 20
            held(await second.admit(key, limits, 15, NOW))
            refused = await first.reserve(session, 6, NOW)
            assert refused is not None and not refused.allowed and refused.remaining == 5
            assert allows(await first.reserve(session, 5, NOW))
            # A key without a quota has nothing to reserve.
            unlimited = held(await first.admit(new_key(), KeyLimits(max_concurrent=1), 0, NOW))
            assert await first.reserve(unlimited, 10, NOW) is None

    run(scenario)


def test_a_session_reseeds_a_lost_counter(redis_server: str) -> None:
    key, limits = new_key(), KeyLimits(monthly_characters=50)
    usage = Usage({(key, datetime(2026, 3, 1)): 40})

    async def scenario() -> None:
        async with gateways(redis_server, 1, usage=usage) as [gateway]:
            session = held(await gateway.admit(key, limits, 0, NOW))
            # Redis lost it (restarted, say): the store's count is read again.
            await gateway.client.delete(f"speechgate:{{{key}}}:quota:2026-03")
            assert not allows(await gateway.reserve(session, 11, NOW))
            assert len(usage.asked) == 2

    run(scenario)


def test_unreachable_redis_is_a_clear_503(redis_server: str) -> None:
    key = new_key()

    async def scenario(url: str) -> None:
        gateway = await RedisLimiter.connect(url, Usage())
        try:
            with pytest.raises(LimitsUnavailable) as raised:
                await gateway.admit(key, KeyLimits(max_concurrent=1), 1, NOW)
            error = raised.value
            assert (error.status_code, error.code) == (503, "limits_unavailable")
            assert "Redis" in error.message and error.headers["Retry-After"] == "1"
            # A key without limits does not need Redis.
            unlimited = held(await gateway.admit(key, KeyLimits(), 1, NOW))
            gateway.release(unlimited, 0)
            assert gateway.in_flight(key) == 0
        finally:
            await gateway.close()

    with refusing_port() as port:
        run(lambda: scenario(f"redis://127.0.0.1:{port}/0"))


def test_connect_renews_in_the_background(redis_server: str) -> None:
    key = new_key()

    async def scenario() -> None:
        gateway = await RedisLimiter.connect(redis_server, Usage(), lease=0.3)
        try:
            hold = held(await gateway.admit(key, KeyLimits(max_concurrent=1), 1, NOW))
            leases = f"speechgate:{{{key}}}:leases"
            first = await gateway.client.zscore(leases, hold.id)
            assert first is not None
            async with asyncio.timeout(30):
                # Polled: the renewal runs on its own timer (every lease / 3).
                while await gateway.client.zscore(leases, hold.id) == first:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            assert (await gateway.client.zscore(leases, hold.id) or 0) > first
            gateway.release(hold, 0)
        finally:
            await gateway.close()

    run(scenario)
