"""API key secrets: made once, shown once, kept only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from speechgate.errors import InvalidRequest

PREFIX = "sk-sg-"
# Shown in listings so that people can tell their keys apart without the secret.
_HINT_LENGTH = len(PREFIX) + 4


def generate_key() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def hash_key(secret: str) -> str:
    """SHA-256 of the secret: unsalted and fast is enough for 256 random bits."""
    return hashlib.sha256(secret.encode()).hexdigest()


def key_hint(secret: str) -> str:
    return secret[:_HINT_LENGTH] + "..."


def same_secret(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, surrounding whitespace ignored."""
    if authorization is None:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


@dataclass(frozen=True)
class KeyLimits:
    """What a key may do; None means unlimited (or, for models, every model)."""

    models: tuple[str, ...] | None = None
    requests_per_second: float | None = None
    burst: int | None = None
    max_concurrent: int | None = None
    monthly_characters: int | None = None
    expires_at: datetime | None = None

    def changed(self, changes: Mapping[str, Any]) -> KeyLimits:
        return replace(self, **changes)


@dataclass(frozen=True)
class ApiKey:
    """A stored key, without its secret."""

    id: str
    name: str
    hint: str
    limits: KeyLimits
    created_at: datetime
    revoked_at: datetime | None = None

    def usable_at(self, now: datetime) -> bool:
        expires = self.limits.expires_at
        return self.revoked_at is None and (expires is None or now < expires)

    def allows_model(self, model: str) -> bool:
        return self.limits.models is None or model in self.limits.models


def check_limits(limits: KeyLimits) -> KeyLimits:
    """Refuse combinations that mean nothing; returns `limits` unchanged."""
    if limits.burst is not None and limits.requests_per_second is None:
        raise InvalidRequest("burst needs requests_per_second.", param="burst")
    return limits
