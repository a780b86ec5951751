"""The store's tables. Changes go through a new migration in `migrations/versions/`."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("hint", String(20), nullable=False),
    Column("models", JSON, nullable=True),
    Column("requests_per_second", Float, nullable=True),
    Column("burst", Integer, nullable=True),
    Column("max_concurrent", Integer, nullable=True),
    Column("monthly_characters", Integer, nullable=True),
    Column("expires_at", DateTime, nullable=True),
    Column("created_at", DateTime, nullable=False),
    Column("revoked_at", DateTime, nullable=True),
)

usage = Table(
    "usage",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime, nullable=False),
    Column("request_id", String(200), nullable=False),
    Column("key_id", String(40), nullable=True),
    Column("model", String(200), nullable=False),
    Column("provider", String(200), nullable=False),
    Column("engine", String(200), nullable=False),
    Column("voice", String(200), nullable=False),
    Column("characters", Integer, nullable=False),
    Column("audio_seconds", Float, nullable=False),
    Column("time_to_first_audio", Float, nullable=True),
    Column("total_seconds", Float, nullable=False),
    Column("status", Integer, nullable=False),
    Index("ix_usage_at", "at"),
    Index("ix_usage_key_at", "key_id", "at"),
)

# Pronunciation dictionaries (ElevenLabs' name for lexicons), each owned by the key that made it
# (`key_id` NULL: made without a key, with auth.mode `none`).
pronunciation_dictionaries = Table(
    "pronunciation_dictionaries",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("version_id", String(40), nullable=False),
    Column("key_id", String(40), nullable=True),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=True),
    Column("rules", JSON, nullable=False),
    Column("created_at", DateTime, nullable=False),
    Index("ix_pronunciation_dictionaries_key", "key_id"),
)
