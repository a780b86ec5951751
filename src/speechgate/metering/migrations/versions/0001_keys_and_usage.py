"""API keys and usage records.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("hint", sa.String(20), nullable=False),
        sa.Column("models", sa.JSON, nullable=True),
        sa.Column("requests_per_second", sa.Float, nullable=True),
        sa.Column("burst", sa.Integer, nullable=True),
        sa.Column("max_concurrent", sa.Integer, nullable=True),
        sa.Column("monthly_characters", sa.Integer, nullable=True),
        sa.Column("expires_at", sa.DateTime, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("revoked_at", sa.DateTime, nullable=True),
    )
    op.create_table(
        "usage",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("request_id", sa.String(200), nullable=False),
        sa.Column("key_id", sa.String(40), nullable=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("provider", sa.String(200), nullable=False),
        sa.Column("engine", sa.String(200), nullable=False),
        sa.Column("voice", sa.String(200), nullable=False),
        sa.Column("characters", sa.Integer, nullable=False),
        sa.Column("audio_seconds", sa.Float, nullable=False),
        sa.Column("time_to_first_audio", sa.Float, nullable=True),
        sa.Column("total_seconds", sa.Float, nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
    )
    op.create_index("ix_usage_at", "usage", ["at"])
    op.create_index("ix_usage_key_at", "usage", ["key_id", "at"])


def downgrade() -> None:
    op.drop_table("usage")
    op.drop_table("api_keys")
