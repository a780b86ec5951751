"""Who is asking and may they: authentication, per-key admission, usage recording.

The request path touches the store only on a key-cache miss and a key's first request of a
month, both in a thread; records are written in batches by `UsageRecorder`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from speechgate import tracing
from speechgate.errors import AuthenticationFailed, InsufficientQuota, PermissionDenied, RateLimited
from speechgate.metering.key_secrets import ApiKey, bearer_token, hash_key, same_secret
from speechgate.metering.limiter import Hold, Limiter, MemoryLimiter, UsedSoFar
from speechgate.metering.limits import Decision
from speechgate.metering.records import UsageRecord
from speechgate.metering.reports import Pricing
from speechgate.metering.store import Store, StoredKey
from speechgate.metering.usage_writer import UsageRecorder
from speechgate.settings import Settings


def _quota_spent(decision: Decision, characters: int, headers: dict[str, str]) -> InsufficientQuota:
    return InsufficientQuota(
        f"This key's monthly quota of {decision.limit} characters cannot cover "
        f"{characters} more ({decision.remaining} left until the month ends).",
        decision.retry_after,
        headers=headers,
    )


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)  # naive, like every time in the store


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a key, the admin, or anyone (auth mode `none`)."""

    key: ApiKey | None = None
    admin: bool = False

    @property
    def key_id(self) -> str | None:
        return self.key.id if self.key is not None else None

    @property
    def sees_all_usage(self) -> bool:
        return self.key is None


ANYONE = Principal()
ADMIN = Principal(admin=True)


@dataclass(frozen=True)
class Caller:
    """Who a speech request comes from, however its front end learned it: `principal` for
    the key's limits and usage, `address` (the client's host) for its place in the queue,
    `owner` for the stored voices it may name (None: every one)."""

    principal: Principal = ANYONE
    address: str | None = None
    owner: str | None = None

    @classmethod
    def of(cls, principal: Principal, address: str | None = None) -> Caller:
        """A caller who sees the stored voices of its key (all of them without one)."""
        return cls(principal, address, principal.key_id)

    @property
    def sender(self) -> tuple[str | None, str | None]:
        """What a client keeps across a retry: its key and its address (a refused request
        may keep a place for the retry that names the same)."""
        return self.principal.key_id, self.address

    @property
    def share(self) -> Hashable:
        """Whom the workers are shared fairly between: a key, or else an address."""
        key_id = self.principal.key_id
        return key_id if key_id is not None else ("address", self.address)


NOBODY = Caller()
"""The caller of work the server does of its own accord (a shadow request)."""


@dataclass
class Admission:
    """A speech request let in, holding its slot and reserved characters, if keyed."""

    hold: Hold | None
    characters: int
    headers: dict[str, str] = field(default_factory=dict)
    released: bool = False


class Tenancy:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        recorder: UsageRecorder | None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = utc_now,
        limiter: Limiter | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.recorder = recorder
        self.clock = clock
        self.now = now
        # Read at each use: tests move this object's clock.
        self.limiter = limiter or MemoryLimiter(lambda: self.clock(), self._characters_used)
        self.pricing = Pricing(
            settings.usage.prices,
            settings.usage.compute_cost_per_hour,
            settings.usage.reference_prices,
        )
        self._admin_key = (
            settings.auth.admin_key.get_secret_value() if settings.auth.admin_key else None
        )
        self._keys: dict[str, tuple[float, StoredKey]] = {}
        self._keys_by_id: dict[str, tuple[float, ApiKey | None]] = {}

    @classmethod
    async def open(cls, settings: Settings) -> Tenancy:
        """Open (and migrate) the store, start the recorder, connect to the shared limits."""
        store = Store(settings.store_url)
        await asyncio.to_thread(store.migrate)
        recorder = None
        if settings.usage.metering:
            recorder = UsageRecorder(store, settings.usage.flush_interval)
            recorder.start()
        tenancy = cls(settings, store, recorder)
        if settings.store.limits_url is not None:
            try:
                tenancy.limiter = await _redis_limiter(
                    settings.store.limits_url, tenancy._characters_used
                )
            except BaseException:
                await tenancy.close()
                raise
        return tenancy

    async def close(self) -> None:
        await self.limiter.close()
        if self.recorder is not None:
            await self.recorder.close()
        await asyncio.to_thread(self.store.close)

    # --- authentication -------------------------------------------------------------------

    @property
    def admin_enabled(self) -> bool:
        return self._admin_key is not None

    def is_admin(self, token: str | None) -> bool:
        return (
            token is not None
            and self._admin_key is not None
            and same_secret(token, self._admin_key)
        )

    async def authenticate(self, authorization: str | None) -> Principal:
        token = bearer_token(authorization)
        if self.is_admin(token):
            return ADMIN
        if self.settings.auth.mode == "none":
            return ANYONE
        if token is None:
            raise AuthenticationFailed(
                "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'."
            )
        key = await self.find_key(token)
        if key is None or not key.usable_at(self.now()):
            # One answer for unknown, revoked and expired keys, and never the key itself.
            raise AuthenticationFailed("Incorrect, revoked or expired API key provided.")
        return Principal(key)

    async def find_key(self, token: str) -> ApiKey | None:
        key_hash = hash_key(token)
        cached = self._keys.get(key_hash)
        if cached is None or cached[0] <= self.clock():
            stored = await asyncio.to_thread(self.store.find_key, key_hash)
            if stored is None:
                # Unknown keys are not cached: anyone could fill the cache with them.
                self._keys.pop(key_hash, None)
                return None
            cached = (self.clock() + self.settings.auth.key_cache_ttl, stored)
            self._keys[key_hash] = cached
        stored = cached[1]
        # Found by its hash; compared again in constant time, so no comparison leaks by timing.
        return stored.key if same_secret(stored.key_hash, key_hash) else None

    async def key_principal(self, key_id: str) -> Principal:
        """Who acts as the key with this id, for front ends whose clients carry no key;
        AuthenticationFailed when it is gone, revoked or expired."""
        cached = self._keys_by_id.get(key_id)
        if cached is None or cached[0] <= self.clock():
            key = await asyncio.to_thread(self.store.get_key, key_id)
            cached = (self.clock() + self.settings.auth.key_cache_ttl, key)
            # Only configured ids are looked up by id, never a client's: no bound needed.
            self._keys_by_id[key_id] = cached
        key = cached[1]
        if key is None or not key.usable_at(self.now()):
            raise AuthenticationFailed(f"The key {key_id!r} is unknown, revoked or expired.")
        return Principal(key)

    def forget_keys(self) -> None:
        """Drop cached keys (after an admin change, which must apply at once)."""
        self._keys.clear()
        self._keys_by_id.clear()

    # --- admission ------------------------------------------------------------------------

    async def admit(self, principal: Principal, model: str, characters: int) -> Admission:
        """Check the key's model list and limits for one speech request; raises
        PermissionDenied, RateLimited, InsufficientQuota or LimitsUnavailable."""
        with tracing.span(tracing.ADMISSION, {"speechgate.characters": characters}):
            return await self._admit(principal, model, characters)

    async def _admit(self, principal: Principal, model: str, characters: int) -> Admission:
        key = principal.key
        if key is None:
            return Admission(None, characters)
        if not key.allows_model(model):
            raise PermissionDenied(
                f"This API key is not allowed to use the model {model!r}.",
                param="model",
                code="model_not_allowed",
            )
        limits = key.limits
        verdict = await self.limiter.admit(key.id, limits, characters, self.now())
        headers: dict[str, str] = {}
        if verdict.requests is not None:
            headers |= verdict.requests.headers("requests")
            if not verdict.requests.allowed:
                raise RateLimited(
                    f"Rate limit reached: {limits.requests_per_second:g} requests per second "
                    f"(burst {limits.burst or verdict.requests.limit}) for this key.",
                    verdict.requests.retry_after,
                    headers=headers,
                )
        if verdict.concurrency_refused:
            raise RateLimited(
                f"Concurrency limit reached: {limits.max_concurrent} requests at once for "
                "this key.",
                1.0,
                code="concurrency_limit_exceeded",
                headers=headers,
            )
        if verdict.characters is not None:
            headers |= verdict.characters.headers("characters")
            if not verdict.characters.allowed:
                raise _quota_spent(verdict.characters, characters, headers)
        return Admission(verdict.hold, characters, headers)

    async def reserve(self, admission: Admission, characters: int) -> None:
        """Count `characters` more for an admitted streaming session; raises InsufficientQuota."""
        if admission.hold is not None:
            decision = await self.limiter.reserve(admission.hold, characters, self.now())
            if decision is not None and not decision.allowed:
                raise _quota_spent(decision, characters, decision.headers("characters"))
        admission.characters += characters

    def release(self, admission: Admission, billable: bool) -> None:
        """The request ended: free its slot; give its characters back if nothing was spoken."""
        if admission.released or admission.hold is None:
            return
        admission.released = True
        self.limiter.release(admission.hold, 0 if billable else admission.characters)

    async def release_before_answering(self, admission: Admission, billable: bool) -> None:
        """`release`, and wait until every gateway sees the slot free, so a client's next
        request sent as this answer arrives is not refused for it."""
        hold = admission.hold
        self.release(admission, billable)
        if hold is not None:
            await self.limiter.settled(hold)

    def in_flight(self, key_id: str) -> int:
        return self.limiter.in_flight(key_id)

    async def _characters_used(self, key_id: str, start: datetime, end: datetime) -> int:
        return await asyncio.to_thread(self.store.characters_used, key_id, start, end)

    # --- recording ------------------------------------------------------------------------

    def record(self, record: UsageRecord) -> None:
        if self.recorder is not None:
            self.recorder.record(record)


async def _redis_limiter(url: str, used: UsedSoFar) -> Limiter:
    try:
        from speechgate.metering.redis_limiter import RedisLimiter
    except ImportError as error:
        raise RuntimeError(
            f"store.limits_url needs the Redis client: pip install 'speechgate[redis]' ({error})"
        ) from None
    return await RedisLimiter.connect(url, used)
