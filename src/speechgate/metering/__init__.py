"""Tenancy: API keys, per-key limits, usage metering and cost reports.

`keys` makes and checks secrets, `store` keeps keys and usage (SQLite or PostgreSQL),
`limits` holds the in-memory per-key limiters, `usage` batches records off the hot path,
`reports` prices them, and `tenancy` ties these together for the API.
"""
