"""The store on SQLite and on a real PostgreSQL: keys, usage totals, periods."""

from __future__ import annotations

import _sqlite3
import ctypes
import itertools
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, text

from speechgate.metering.key_secrets import KeyLimits, hash_key
from speechgate.metering.records import CLIENT_CLOSED, UsageRecord
from speechgate.metering.schema import api_keys
from speechgate.metering.store import Store

NOW = datetime(2026, 3, 14, 12, 0)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    store = Store(store_url)
    store.migrate()
    yield store
    store.close()


def record(
    at: datetime,
    key_id: str | None,
    *,
    status: int = 200,
    chars: int = 10,
    model: str = "tts-1",
    provider: str = "local",
) -> UsageRecord:
    return UsageRecord(
        at=at,
        request_id=f"req_{at.timestamp()}_{status}",
        key_id=key_id,
        model=model,
        provider=provider,
        engine="espeak",
        voice="alloy",
        characters=chars,
        audio_seconds=1.5 if status < 400 else 0.0,
        time_to_first_audio=0.05 if status < 400 else None,
        total_seconds=2.0,
        status=status,
    )


def test_migrating_twice_is_harmless(store: Store) -> None:
    store.migrate()
    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == (
            "0002"
        )


def test_key_lifecycle(store: Store) -> None:
    limits = KeyLimits(
        models=("tts-1", "espeak"),
        requests_per_second=2.5,
        burst=5,
        max_concurrent=2,
        monthly_characters=100_000,
        expires_at=NOW + timedelta(days=30),
    )
    key, secret = store.create_key("team-a", limits, NOW)
    assert secret.startswith("sk-sg-") and len(secret) > 40
    assert key.hint == secret[:10] + "..."

    found = store.find_key(hash_key(secret))
    assert found is not None and found.key == key
    assert found.key.limits == limits
    assert store.find_key(hash_key(secret + "x")) is None
    assert [k.id for k in store.list_keys()] == [key.id]

    updated = store.update_key(key.id, {"burst": 9, "models": None}, name="team-b")
    assert updated is not None
    assert (updated.name, updated.limits.burst, updated.limits.models) == ("team-b", 9, None)
    assert store.get_key(key.id) == updated

    revoked = store.revoke_key(key.id, NOW + timedelta(hours=1))
    assert revoked is not None and revoked.revoked_at == NOW + timedelta(hours=1)
    assert not revoked.usable_at(NOW + timedelta(hours=2))
    # Revoking again keeps the first time.
    again = store.revoke_key(key.id, NOW + timedelta(hours=5))
    assert again is not None and again.revoked_at == revoked.revoked_at
    assert store.revoke_key("key_nope", NOW) is None
    assert store.update_key("key_nope", {"burst": 1}) is None


def test_only_hashes_of_keys_are_stored(store: Store) -> None:
    secrets = [store.create_key(f"k{i}", KeyLimits(), NOW)[1] for i in range(3)]
    with store.engine.connect() as connection:
        rows = connection.execute(select(api_keys)).mappings().all()
    stored = " ".join(str(value) for row in rows for value in row.values())
    for secret in secrets:
        assert secret not in stored
        assert secret[len("sk-sg-") :] not in stored
        assert hash_key(secret) in stored


def test_usage_totals_group_by_key_model_and_provider(store: Store) -> None:
    a, b = "key_a", "key_b"
    store.insert_usage(
        [
            record(NOW, a),
            record(NOW, a, chars=5),
            record(NOW, a, status=500, chars=7),
            record(NOW, a, status=CLIENT_CLOSED, chars=3),
            record(NOW, a, model="espeak"),
            record(NOW, b, status=429, chars=11),
            record(NOW, None, provider="remote"),
        ]
    )
    totals = {
        (t.key_id, t.model, t.provider): t for t in store.usage_totals(NOW, NOW + timedelta(1))
    }
    assert set(totals) == {
        (a, "tts-1", "local"),
        (a, "espeak", "local"),
        (b, "tts-1", "local"),
        (None, "tts-1", "remote"),
    }
    main = totals[(a, "tts-1", "local")]
    assert (main.requests, main.errors, main.aborted) == (4, 1, 1)
    # Billable: the two successes and the abort; the 500 is not.
    assert main.characters == 18
    assert main.audio_seconds == pytest.approx(3.0)
    assert main.busy_seconds == pytest.approx(6.0)
    rejected = totals[(b, "tts-1", "local")]
    assert (rejected.requests, rejected.errors, rejected.characters) == (1, 1, 0)

    only_b = store.usage_totals(NOW, NOW + timedelta(1), key_ids=[b])
    assert [(t.key_id, t.requests) for t in only_b] == [(b, 1)]
    assert store.characters_used(a, NOW, NOW + timedelta(1)) == 28
    assert store.characters_used(b, NOW, NOW + timedelta(1)) == 0


def test_periods_are_half_open_across_a_month_boundary(store: Store) -> None:
    last_of_january = datetime(2026, 1, 31, 23, 59, 59)
    first_of_february = datetime(2026, 2, 1, 0, 0, 0)
    store.insert_usage(
        [record(last_of_january, "k", chars=100), record(first_of_february, "k", chars=1)]
    )

    def characters(start: datetime, end: datetime) -> int:
        return sum(t.characters for t in store.usage_totals(start, end))

    assert characters(datetime(2026, 1, 1), first_of_february) == 100
    assert characters(first_of_february, datetime(2026, 3, 1)) == 1
    assert characters(datetime(2026, 1, 31, 12), datetime(2026, 2, 1, 12)) == 101
    assert store.characters_used("k", first_of_february, datetime(2026, 3, 1)) == 1


def _sqlite_memory_used() -> int:
    """Bytes SQLite itself has allocated in this process (its page caches, mostly): memory
    Python's allocator, and so tracemalloc, never sees."""
    # The sqlite3 module's extension links SQLite; its handle finds SQLite's own symbols.
    library = ctypes.CDLL(_sqlite3.__file__)
    library.sqlite3_memory_used.restype = ctypes.c_int64
    used: int = library.sqlite3_memory_used()
    return used


def test_appending_usage_keeps_sqlite_memory_bounded(tmp_path: Path) -> None:
    # A server appends a usage record per request for ever. With SQLite's default 2 MB page
    # cache per connection, the pages it wrote stayed cached: ~0.2 KB more per request.
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate()
    moments = (NOW + timedelta(seconds=n) for n in itertools.count())

    def append(records: int, batch: int = 25) -> None:
        for _ in range(records // batch):
            store.insert_usage([record(next(moments), None) for _ in range(batch)])

    try:
        append(1500)  # a cache fills up to its bound
        before = _sqlite_memory_used()
        append(3000)
        after = _sqlite_memory_used()
    finally:
        store.close()
    assert after - before < 32 * 1024


def test_pronunciation_dictionaries_belong_to_their_key(store: Store) -> None:
    rules = [{"type": "alias", "string_to_replace": "nginx", "alias": "engine x"}]
    mine = store.add_dictionary("key_a", "ops", "words", rules, NOW)
    keyless = store.add_dictionary(None, "open", None, rules, NOW)
    assert store.get_dictionary(mine.id, "key_a") == mine
    assert store.get_dictionary(mine.id, "key_b") is None
    assert store.get_dictionary(mine.id, None) is None
    assert store.get_dictionary(keyless.id, None) == keyless
    assert store.get_dictionary(keyless.id, "key_a") is None
    assert [d.id for d in store.list_dictionaries("key_a")] == [mine.id]
    assert store.delete_dictionary(mine.id) and store.get_dictionary(mine.id, "key_a") is None
