"""One speech request's meter, whichever front end it came through: filled in as the request
goes, turned into a usage record (and its limits freed) by `finish` when it ends."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from speechgate import tracing
from speechgate.metering.records import UsageRecord
from speechgate.metering.tenancy import Admission, Principal, Tenancy

# A routed model's requests name the provider that served them (speechgate.routing); all
# others are served by this server's own engines.
LOCAL_PROVIDER = "local"


class Metered(Protocol):
    """What a meter reads off a speech response or a streaming session when it ends."""

    @property
    def audio_seconds(self) -> float: ...

    @property
    def time_to_first_audio(self) -> float | None: ...

    @property
    def completed(self) -> bool: ...


@dataclass
class Meter:
    """What is known about one speech request so far; filled in as it goes."""

    request_id: str
    started: float
    principal: Principal | None = None
    model: str = ""
    voice: str = ""
    characters: int = 0
    engine: str = ""
    provider: str = LOCAL_PROVIDER
    stream: Metered | None = None
    admission: Admission | None = None
    headers: dict[str, str] = field(default_factory=dict)


def finish(tenancy: Tenancy, meter: Meter, status: int) -> None:
    """Free the request's limits and record its usage."""
    record = UsageRecord(
        at=tenancy.now(),
        request_id=meter.request_id,
        key_id=meter.principal.key_id if meter.principal else None,
        model=meter.model,
        provider=meter.provider,
        engine=meter.engine,
        voice=meter.voice,
        characters=meter.characters,
        audio_seconds=meter.stream.audio_seconds if meter.stream else 0.0,
        time_to_first_audio=meter.stream.time_to_first_audio if meter.stream else None,
        total_seconds=time.perf_counter() - meter.started,
        status=status,
    )
    if tracing.enabled():
        tracing.describe_request(
            {
                "speechgate.request_id": record.request_id,
                "speechgate.model": record.model,
                "speechgate.provider": record.provider,
                "speechgate.engine": record.engine,
                "speechgate.voice": record.voice,
                "speechgate.characters": record.characters,
                "speechgate.audio_seconds": round(record.audio_seconds, 6),
                "speechgate.status": record.status,
                # The key's id, never its secret; none for the admin or an open server.
                **({"speechgate.key_id": record.key_id} if record.key_id else {}),
            }
        )
    with tracing.span(tracing.USAGE):
        if meter.admission is not None:
            tenancy.release(meter.admission, record.billable)
        tenancy.record(record)
