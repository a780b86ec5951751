"""Key secrets and the Authorization header."""

from __future__ import annotations

import pytest

from speechgate.errors import InvalidRequest
from speechgate.metering.key_secrets import (
    KeyLimits,
    bearer_token,
    check_limits,
    generate_key,
    hash_key,
    key_hint,
)


def test_keys_are_unique_prefixed_and_hashed() -> None:
    keys = {generate_key() for _ in range(100)}
    assert len(keys) == 100
    key = keys.pop()
    assert key.startswith("sk-sg-")
    assert len(key) >= len("sk-sg-") + 43  # 256 bits, base64
    assert hash_key(key) == hash_key(key) != hash_key(key + "x")
    assert len(hash_key(key)) == 64 and key not in hash_key(key)
    assert key_hint(key) == key[:10] + "..."


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer sk-sg-abc", "sk-sg-abc"),
        ("  Bearer   sk-sg-abc \t", "sk-sg-abc"),
        ("bearer sk-sg-abc", "sk-sg-abc"),
        ("Bearer", None),
        ("Bearer    ", None),
        ("Basic dXNlcjpwYXNz", None),
        ("sk-sg-abc", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token_parsing_tolerates_whitespace(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_burst_needs_a_rate() -> None:
    with pytest.raises(InvalidRequest) as raised:
        check_limits(KeyLimits(burst=3))
    assert raised.value.param == "burst"
    assert check_limits(KeyLimits(requests_per_second=1, burst=3)).burst == 3
