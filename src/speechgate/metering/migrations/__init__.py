"""Alembic migrations of the store; `Store.migrate` runs them to head."""
