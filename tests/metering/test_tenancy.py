"""Authentication and per-key admission over a real store (both backends), on fake clocks."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from speechgate.errors import AuthenticationFailed, InsufficientQuota, PermissionDenied, RateLimited
from speechgate.metering.key_secrets import KeyLimits
from speechgate.metering.records import UsageRecord
from speechgate.metering.store import Store
from speechgate.metering.tenancy import ADMIN, ANYONE, Tenancy
from tests.helpers.settings import make_settings

ADMIN_KEY = "admin-" + "x" * 40


class Clocks:
    """A monotonic clock and a UTC wall clock that only the test moves."""

    def __init__(self) -> None:
        self.seconds = 1000.0
        self.wall = datetime(2026, 1, 31, 23, 0)

    def monotonic(self) -> float:
        return self.seconds

    def now(self) -> datetime:
        return self.wall

    def advance(self, seconds: float) -> None:
        self.seconds += seconds
        self.wall += timedelta(seconds=seconds)


@pytest.fixture
def clocks() -> Clocks:
    return Clocks()


@pytest.fixture
def tenancy(store_url: str, clocks: Clocks) -> Iterator[Tenancy]:
    settings = make_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY}, store={"database_url": store_url}
    )
    store = Store(store_url)
    store.migrate()
    yield Tenancy(settings, store, None, clock=clocks.monotonic, now=clocks.now)
    store.close()


def bearer(secret: str) -> str:
    return f"Bearer {secret}"


def test_key_lifecycle_through_authentication(tenancy: Tenancy, clocks: Clocks) -> None:
    key, secret = tenancy.store.create_key(
        "a", KeyLimits(expires_at=clocks.wall + timedelta(hours=2)), clocks.wall
    )
    principal = asyncio.run(tenancy.authenticate(f"  Bearer  {secret} "))
    assert principal.key == key and not principal.admin

    tenancy.store.revoke_key(key.id, clocks.wall)
    # Cached for key_cache_ttl: a revocation from another process lands after it ...
    assert asyncio.run(tenancy.authenticate(bearer(secret))).key_id == key.id
    clocks.advance(tenancy.settings.auth.key_cache_ttl)
    with pytest.raises(AuthenticationFailed):
        asyncio.run(tenancy.authenticate(bearer(secret)))


def test_admin_changes_apply_at_once(tenancy: Tenancy, clocks: Clocks) -> None:
    key, secret = tenancy.store.create_key("a", KeyLimits(), clocks.wall)
    asyncio.run(tenancy.authenticate(bearer(secret)))
    tenancy.store.revoke_key(key.id, clocks.wall)
    tenancy.forget_keys()
    with pytest.raises(AuthenticationFailed):
        asyncio.run(tenancy.authenticate(bearer(secret)))


@pytest.mark.parametrize(
    "header", [None, "", "Bearer", "Bearer sk-sg-unknown", "Basic abc", "revoked", "expired"]
)
def test_missing_unknown_revoked_and_expired_keys_are_401(
    tenancy: Tenancy, clocks: Clocks, header: str | None
) -> None:
    if header in ("revoked", "expired"):
        key, secret = tenancy.store.create_key(
            header, KeyLimits(expires_at=clocks.wall + timedelta(minutes=1)), clocks.wall
        )
        if header == "revoked":
            tenancy.store.revoke_key(key.id, clocks.wall)
        else:
            clocks.advance(60)
        header = bearer(secret)
    with pytest.raises(AuthenticationFailed) as raised:
        asyncio.run(tenancy.authenticate(header))
    assert (raised.value.status_code, raised.value.code) == (401, "invalid_api_key")
    assert "sk-sg-" not in raised.value.message


def test_admin_key_and_open_mode(tenancy: Tenancy, store_url: str) -> None:
    assert asyncio.run(tenancy.authenticate(bearer(ADMIN_KEY))) == ADMIN
    with pytest.raises(AuthenticationFailed):
        asyncio.run(tenancy.authenticate(bearer(ADMIN_KEY + "x")))
    open_mode = Tenancy(make_settings(store={"database_url": store_url}), tenancy.store, None)
    assert asyncio.run(open_mode.authenticate(None)) == ANYONE
    assert asyncio.run(open_mode.authenticate("Bearer whatever")) == ANYONE


def test_secrets_are_compared_in_constant_time(
    tenancy: Tenancy, clocks: Clocks, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    _, secret = tenancy.store.create_key("a", KeyLimits(), clocks.wall)
    asyncio.run(tenancy.authenticate(bearer(secret)))
    asyncio.run(tenancy.authenticate(bearer(ADMIN_KEY)))
    assert len(compared) >= 2
    assert (ADMIN_KEY.encode(), ADMIN_KEY.encode()) in compared


def test_a_key_limited_to_models_gets_403_for_others(tenancy: Tenancy, clocks: Clocks) -> None:
    _, secret = tenancy.store.create_key("a", KeyLimits(models=("tts-1",)), clocks.wall)
    principal = asyncio.run(tenancy.authenticate(bearer(secret)))
    asyncio.run(tenancy.admit(principal, "tts-1", 10))
    with pytest.raises(PermissionDenied) as raised:
        asyncio.run(tenancy.admit(principal, "espeak", 10))
    assert (raised.value.status_code, raised.value.code) == (403, "model_not_allowed")


def test_rate_limit_burst_then_refill(tenancy: Tenancy, clocks: Clocks) -> None:
    _, secret = tenancy.store.create_key(
        "a", KeyLimits(requests_per_second=1, burst=3), clocks.wall
    )
    principal = asyncio.run(tenancy.authenticate(bearer(secret)))

    def admit() -> None:
        tenancy.release(asyncio.run(tenancy.admit(principal, "tts-1", 1)), billable=True)

    for _ in range(3):
        admit()
    with pytest.raises(RateLimited) as raised:
        admit()
    headers = raised.value.headers
    assert raised.value.code == "rate_limit_exceeded"
    assert headers["x-ratelimit-limit-requests"] == "3"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert headers["Retry-After"] == "1"
    clocks.advance(0.99)
    with pytest.raises(RateLimited):
        admit()
    clocks.advance(0.01)
    admit()


def test_concurrency_cap(tenancy: Tenancy, clocks: Clocks) -> None:
    _, secret = tenancy.store.create_key("a", KeyLimits(max_concurrent=2), clocks.wall)
    principal = asyncio.run(tenancy.authenticate(bearer(secret)))
    first = asyncio.run(tenancy.admit(principal, "tts-1", 1))
    asyncio.run(tenancy.admit(principal, "tts-1", 1))
    with pytest.raises(RateLimited) as raised:
        asyncio.run(tenancy.admit(principal, "tts-1", 1))
    assert raised.value.code == "concurrency_limit_exceeded"
    tenancy.release(first, billable=True)
    tenancy.release(first, billable=True)  # twice is once
    asyncio.run(tenancy.admit(principal, "tts-1", 1))
    with pytest.raises(RateLimited):
        asyncio.run(tenancy.admit(principal, "tts-1", 1))


def test_quota_counts_the_store_and_resets_with_the_month(tenancy: Tenancy, clocks: Clocks) -> None:
    key, secret = tenancy.store.create_key("a", KeyLimits(monthly_characters=100), clocks.wall)
    # 60 characters already used this month (by an earlier server run), 50 last month.
    tenancy.store.insert_usage(
        [
            UsageRecord(at, "r", key.id, "tts-1", "local", "espeak", "alloy", n, 1, 0.1, 1, 200)
            for at, n in [(clocks.wall, 60), (datetime(2025, 12, 31), 50)]
        ]
    )
    principal = asyncio.run(tenancy.authenticate(bearer(secret)))
    failed = asyncio.run(tenancy.admit(principal, "tts-1", 30))
    assert failed.headers["x-ratelimit-remaining-characters"] == "10"
    # A request that used no engine gives its characters back.
    tenancy.release(failed, billable=False)
    asyncio.run(tenancy.admit(principal, "tts-1", 40))
    with pytest.raises(InsufficientQuota) as raised:
        asyncio.run(tenancy.admit(principal, "tts-1", 1))
    error = raised.value
    assert (error.status_code, error.error_type, error.code) == (
        429,
        "insufficient_quota",
        "insufficient_quota",
    )
    assert error.headers["x-ratelimit-remaining-characters"] == "0"
    assert error.headers["x-ratelimit-reset-characters"] == "1h0m0s"
    clocks.advance(3600)  # February
    asyncio.run(tenancy.admit(principal, "tts-1", 100))


def test_concurrent_first_requests_cannot_both_pass_a_cap(tenancy: Tenancy, clocks: Clocks) -> None:
    # Both wait for the store (the month's quota so far) before their checks.
    _, secret = tenancy.store.create_key(
        "a", KeyLimits(max_concurrent=1, monthly_characters=1000), clocks.wall
    )

    async def both() -> list[object]:
        principal = await tenancy.authenticate(bearer(secret))
        return await asyncio.gather(
            tenancy.admit(principal, "tts-1", 1),
            tenancy.admit(principal, "tts-1", 1),
            return_exceptions=True,
        )

    outcomes = asyncio.run(both())
    assert sum(isinstance(outcome, RateLimited) for outcome in outcomes) == 1


def test_a_request_admitted_before_its_keys_limits_changed_frees_its_slot(
    tenancy: Tenancy, clocks: Clocks
) -> None:
    key, secret = tenancy.store.create_key("a", KeyLimits(max_concurrent=1), clocks.wall)
    principal = asyncio.run(tenancy.authenticate(bearer(secret)))
    first = asyncio.run(tenancy.admit(principal, "tts-1", 1))
    tenancy.store.update_key(key.id, {"max_concurrent": 2})
    tenancy.forget_keys()
    principal = asyncio.run(tenancy.authenticate(bearer(secret)))
    # The slot taken under the old limits counts under the new ones, and comes back.
    asyncio.run(tenancy.admit(principal, "tts-1", 1))
    with pytest.raises(RateLimited):
        asyncio.run(tenancy.admit(principal, "tts-1", 1))
    tenancy.release(first, billable=True)
    assert tenancy.in_flight(key.id) == 1
    asyncio.run(tenancy.admit(principal, "tts-1", 1))
