"""Who serves a request, and in which order: pure functions of (request key, route, health).

A request's key (its `x-request-id`, or its `user`) hashes to one of `BUCKETS` buckets; weights
divide the buckets between providers in the route's order. The same key always lands in the
same bucket, so a retry goes to the provider that saw the first try, and raising a canary's
weight moves only the buckets at the boundary.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container, Mapping, Sequence

BUCKETS = 10_000


def bucket(key: str, salt: str = "") -> int:
    """A stable bucket in [0, BUCKETS) for `key` (the same in every process and release)."""
    digest = hashlib.blake2b(f"{salt}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % BUCKETS


def pick(weights: Mapping[str, float], key: str, disabled: Container[str] = ()) -> str | None:
    """The provider whose share of the buckets holds `key`'s bucket, among the enabled ones
    with a positive weight; None when there is none. Weights need not sum to 100."""
    shares = [(name, weight) for name, weight in weights.items() if weight > 0]
    shares = [(name, weight) for name, weight in shares if name not in disabled]
    total = sum(weight for _, weight in shares)
    if not shares:
        return None
    point = bucket(key) / BUCKETS * total
    reached = 0.0
    for name, weight in shares:
        reached += weight
        if point < reached:
            return name
    return shares[-1][0]  # rounding at the very top


def attempt_order(
    weights: Mapping[str, float],
    fallback: Sequence[str],
    key: str,
    disabled: Container[str] = (),
) -> list[str]:
    """Providers to try for `key`, in order: the one its bucket picks, then the fallback chain,
    then the route's other providers by descending weight (a 0 % provider is kept warm for a
    rollback and is the last resort). Disabled providers are left out."""
    first = pick(weights, key, disabled)
    rest = sorted(weights, key=lambda name: -weights[name])  # stable: ties keep route order
    order: list[str] = []
    for name in [*([first] if first else []), *fallback, *rest]:
        if name not in order and name not in disabled:
            order.append(name)
    return order


def sampled(key: str, percent: float, salt: str) -> bool:
    """Whether `key` falls in the sampled `percent` (independent of the weight buckets)."""
    return bucket(key, salt) < percent / 100 * BUCKETS
