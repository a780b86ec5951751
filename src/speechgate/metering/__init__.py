"""Tenancy: API keys, per-key limits, usage metering and cost reports; `tenancy` ties them
together for the API."""
