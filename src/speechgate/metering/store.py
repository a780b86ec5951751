"""Keys and usage records in SQLite or PostgreSQL (SQLAlchemy Core, migrated by Alembic).

Every method blocks on the database: call them from a thread (`asyncio.to_thread`), never
from the event loop. The engine's connection pool is thread-safe.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, Row, create_engine, event, func, insert, select, update
from sqlalchemy.engine import make_url

from speechgate.metering.key_secrets import ApiKey, KeyLimits, generate_key, hash_key, key_hint
from speechgate.metering.records import CLIENT_CLOSED, UsageRecord
from speechgate.metering.schema import api_keys, pronunciation_dictionaries, usage

_MIGRATIONS = Path(__file__).parent / "migrations"
# Successes and client aborts used an engine; errors did not (see UsageRecord.billable).
_BILLABLE = (usage.c.status < 400) | (usage.c.status == CLIENT_CLOSED)
# SQLite's page cache per connection: every page a server appends stays cached until it is
# full, which with the default reads as a leak; appending touches only the rightmost pages.
_SQLITE_CACHE_KIB = 256


@dataclass(frozen=True)
class StoredKey:
    key: ApiKey
    key_hash: str


@dataclass(frozen=True)
class UsageTotals:
    """Sums over usage records sharing a group (key, model, provider)."""

    key_id: str | None
    model: str
    provider: str
    requests: int
    errors: int
    aborted: int
    characters: int
    audio_seconds: float
    busy_seconds: float
    """Request time of billable requests, which compute cost per hour is charged on."""


@dataclass(frozen=True)
class StoredDictionary:
    """A pronunciation dictionary: its rules in ElevenLabs' shape, already validated."""

    id: str
    version_id: str
    key_id: str | None
    name: str
    description: str | None
    rules: list[dict[str, Any]]
    created_at: datetime


def _engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        # The `postgres` extra's driver, not SQLAlchemy's default psycopg2.
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    if parsed.database:
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed)

    @event.listens_for(engine, "connect")
    def _pragmas(connection: Any, _: object) -> None:
        # WAL lets the server write usage while the CLI reads it; the busy timeout makes
        # writers from two processes wait for each other instead of failing.
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=5000")
        cursor.execute(f"PRAGMA cache_size=-{_SQLITE_CACHE_KIB}")
        cursor.close()

    return engine


def _key(row: Row[Any]) -> ApiKey:
    return ApiKey(
        id=row.id,
        name=row.name,
        hint=row.hint,
        limits=KeyLimits(
            models=tuple(row.models) if row.models is not None else None,
            requests_per_second=row.requests_per_second,
            burst=row.burst,
            max_concurrent=row.max_concurrent,
            monthly_characters=row.monthly_characters,
            expires_at=row.expires_at,
        ),
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


def _dictionary(row: Row[Any]) -> StoredDictionary:
    return StoredDictionary(
        id=row.id,
        version_id=row.version_id,
        key_id=row.key_id,
        name=row.name,
        description=row.description,
        rules=list(row.rules),
        created_at=row.created_at,
    )


def _limit_columns(limits: KeyLimits) -> dict[str, Any]:
    columns = {field.name: getattr(limits, field.name) for field in fields(limits)}
    columns["models"] = list(limits.models) if limits.models is not None else None
    return columns


class Store:
    def __init__(self, url: str) -> None:
        self.engine = _engine(url)

    def migrate(self) -> None:
        config = Config()
        config.set_main_option("script_location", str(_MIGRATIONS))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def close(self) -> None:
        self.engine.dispose()

    # --- keys ---------------------------------------------------------------------------

    def create_key(self, name: str, limits: KeyLimits, now: datetime) -> tuple[ApiKey, str]:
        """A new key and its secret; the secret is not kept and cannot be shown again."""
        secret = generate_key()
        key = ApiKey(
            id=f"key_{secrets.token_hex(8)}",
            name=name,
            hint=key_hint(secret),
            limits=limits,
            created_at=now,
        )
        with self.engine.begin() as connection:
            connection.execute(
                insert(api_keys).values(
                    id=key.id,
                    name=name,
                    key_hash=hash_key(secret),
                    hint=key.hint,
                    created_at=now,
                    **_limit_columns(limits),
                )
            )
        return key, secret

    def find_key(self, key_hash: str) -> StoredKey | None:
        with self.engine.connect() as connection:
            row = connection.execute(
                select(api_keys).where(api_keys.c.key_hash == key_hash)
            ).first()
        return None if row is None else StoredKey(_key(row), row.key_hash)

    def get_key(self, key_id: str) -> ApiKey | None:
        with self.engine.connect() as connection:
            row = connection.execute(select(api_keys).where(api_keys.c.id == key_id)).first()
        return None if row is None else _key(row)

    def list_keys(self) -> list[ApiKey]:
        with self.engine.connect() as connection:
            rows = connection.execute(select(api_keys).order_by(api_keys.c.created_at)).all()
        return [_key(row) for row in rows]

    def update_key(
        self, key_id: str, changes: Mapping[str, Any], name: str | None = None
    ) -> ApiKey | None:
        """Set some limits (KeyLimits field names; None lifts one) and/or rename."""
        key = self.get_key(key_id)
        if key is None:
            return None
        limits = key.limits.changed(changes)
        values = _limit_columns(limits) | ({"name": name} if name is not None else {})
        with self.engine.begin() as connection:
            connection.execute(update(api_keys).where(api_keys.c.id == key_id).values(values))
        return replace(key, limits=limits, name=name or key.name)

    def revoke_key(self, key_id: str, now: datetime) -> ApiKey | None:
        with self.engine.begin() as connection:
            connection.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=now)
            )
        return self.get_key(key_id)

    # --- pronunciation dictionaries ------------------------------------------------------

    def add_dictionary(
        self,
        key_id: str | None,
        name: str,
        description: str | None,
        rules: list[dict[str, Any]],
        now: datetime,
    ) -> StoredDictionary:
        """Store a dictionary for `key_id` in one insert, whole or not at all."""
        dictionary = StoredDictionary(
            id=f"pd_{secrets.token_hex(10)}",
            version_id=f"pdv_{secrets.token_hex(10)}",
            key_id=key_id,
            name=name,
            description=description,
            rules=rules,
            created_at=now,
        )
        with self.engine.begin() as connection:
            connection.execute(
                insert(pronunciation_dictionaries).values(
                    {f.name: getattr(dictionary, f.name) for f in fields(dictionary)}
                )
            )
        return dictionary

    def get_dictionary(self, dictionary_id: str, key_id: str | None) -> StoredDictionary | None:
        """The dictionary, if `key_id` owns it (None: one made without a key)."""
        table = pronunciation_dictionaries
        owner = table.c.key_id.is_(None) if key_id is None else table.c.key_id == key_id
        with self.engine.connect() as connection:
            row = connection.execute(
                select(table).where(table.c.id == dictionary_id, owner)
            ).first()
        return None if row is None else _dictionary(row)

    def list_dictionaries(self, key_id: str | None) -> list[StoredDictionary]:
        table = pronunciation_dictionaries
        owner = table.c.key_id.is_(None) if key_id is None else table.c.key_id == key_id
        with self.engine.connect() as connection:
            rows = connection.execute(select(table).where(owner).order_by(table.c.created_at))
            return [_dictionary(row) for row in rows]

    def delete_dictionary(self, dictionary_id: str) -> bool:
        with self.engine.begin() as connection:
            deleted = connection.execute(
                pronunciation_dictionaries.delete().where(
                    pronunciation_dictionaries.c.id == dictionary_id
                )
            )
        return bool(deleted.rowcount)

    # --- usage --------------------------------------------------------------------------

    def insert_usage(self, records: Sequence[UsageRecord]) -> None:
        if not records:
            return
        rows = [{f.name: getattr(r, f.name) for f in fields(r)} for r in records]
        with self.engine.begin() as connection:
            connection.execute(insert(usage), rows)

    def characters_used(self, key_id: str, start: datetime, end: datetime) -> int:
        with self.engine.connect() as connection:
            used = connection.execute(
                select(func.coalesce(func.sum(usage.c.characters), 0)).where(
                    usage.c.key_id == key_id,
                    usage.c.at >= start,
                    usage.c.at < end,
                    _BILLABLE,
                )
            ).scalar_one()
        return int(used)

    def usage_totals(
        self, start: datetime, end: datetime, key_ids: Iterable[str] | None = None
    ) -> list[UsageTotals]:
        """Totals in [start, end) per (key, model, provider); `key_ids` limits the keys."""

        def billed(column: Any) -> Any:
            return func.coalesce(func.sum(column).filter(_BILLABLE), 0)

        query = (
            select(
                usage.c.key_id,
                usage.c.model,
                usage.c.provider,
                func.count().label("requests"),
                func.count().filter(~_BILLABLE).label("errors"),
                func.count().filter(usage.c.status == CLIENT_CLOSED).label("aborted"),
                billed(usage.c.characters).label("characters"),
                billed(usage.c.audio_seconds).label("audio_seconds"),
                billed(usage.c.total_seconds).label("busy_seconds"),
            )
            .where(usage.c.at >= start, usage.c.at < end)
            .group_by(usage.c.key_id, usage.c.model, usage.c.provider)
            .order_by(usage.c.key_id, usage.c.model, usage.c.provider)
        )
        if key_ids is not None:
            query = query.where(usage.c.key_id.in_(list(key_ids)))
        with self.engine.connect() as connection:
            rows = connection.execute(query).all()
        return [
            UsageTotals(
                key_id=row.key_id,
                model=row.model,
                provider=row.provider,
                requests=int(row.requests),
                errors=int(row.errors),
                aborted=int(row.aborted),
                characters=int(row.characters),
                audio_seconds=float(row.audio_seconds),
                busy_seconds=float(row.busy_seconds),
            )
            for row in rows
        ]
