"""What one speech request used."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

# The status recorded for a client that left before its audio was complete (nginx's
# "client closed request"): the work done until then is still billed.
CLIENT_CLOSED = 499


@dataclass(frozen=True)
class UsageRecord:
    at: datetime
    """When the request ended, UTC (naive: every time in the store is UTC)."""
    request_id: str
    key_id: str | None
    model: str
    provider: str
    engine: str
    voice: str
    characters: int
    audio_seconds: float
    time_to_first_audio: float | None
    total_seconds: float
    status: int

    @property
    def billable(self) -> bool:
        return is_billable(self.status)


def is_billable(status: int) -> bool:
    """Whether a request that ended with `status` used an engine: errors did not."""
    return status < 400 or status == CLIENT_CLOSED


def naive_utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def aware_utc(moment: datetime) -> datetime:
    """A stored (naive UTC) time with its offset, as RFC 3339 wants it on the wire."""
    return moment.replace(tzinfo=UTC)
