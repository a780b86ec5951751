"""`GET /v1/status`: what the live operator view shows, as one small JSON document."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from speechgate.activity import Summary
from speechgate.api.state import get_runtime
from speechgate.runtime import Runtime

router = APIRouter()


class EngineStatus(BaseModel):
    name: str
    workers: dict[str, int] = Field(description="Worker processes by state, every state listed.")
    queued: int = Field(description="Requests waiting for a worker.")
    in_flight: int
    restarts: int
    crash_looping: bool
    rejected: dict[str, int] = Field(description="Requests turned away since start, by reason.")
    real_time_factor: float | None = Field(
        description="Seconds of audio per second of synthesis over the engine's recent jobs."
    )


class Status(BaseModel):
    object: Literal["speechgate.status"] = "speechgate.status"
    ready: bool
    engines: list[EngineStatus]
    recent: Summary = Field(
        description="`POST /v1/audio/speech` requests that reached their first audio, over "
        "the last minutes; `incomplete` ones failed or lost their client mid-stream."
    )


@router.get("/v1/status", response_model=Status)
async def status(runtime: Annotated[Runtime, Depends(get_runtime)]) -> Status:
    """Workers, queues and recent throughput and latency, for the operator view at `/`."""
    engines = []
    for name, pool in runtime.pools.items():
        stats = pool.stats()
        engines.append(
            EngineStatus(
                name=name,
                workers={state.value: count for state, count in stats.workers.items()},
                queued=stats.queued,
                in_flight=stats.in_flight,
                restarts=stats.restarts,
                crash_looping=stats.crash_looping,
                rejected=stats.rejected,
                real_time_factor=pool.service_times.real_time_factor,
            )
        )
    return Status(
        ready=runtime.ready,
        engines=engines,
        recent=runtime.recent.summary(),
    )
