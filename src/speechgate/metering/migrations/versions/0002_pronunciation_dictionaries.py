"""Pronunciation dictionaries, owned by keys.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pronunciation_dictionaries",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("version_id", sa.String(40), nullable=False),
        sa.Column("key_id", sa.String(40), nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text, nullable=True),
        sa.Column("rules", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_pronunciation_dictionaries_key", "pronunciation_dictionaries", ["key_id"])


def downgrade() -> None:
    op.drop_table("pronunciation_dictionaries")
