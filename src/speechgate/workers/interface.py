"""What the gateway needs from a pool of engines, whichever backend runs them.

`WorkerPool` runs engines in local processes, `RayPool` as a Ray Serve deployment. Both refuse
at once what cannot start in time (`QueueFull`, `NotReady`), stream audio as it is encoded,
stop a job when its consumer leaves, and end it with `WorkerLost` if what ran it dies.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Hashable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineInfo, SynthesisRequest
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.workers.admission import ServiceTimes


class WorkerState(StrEnum):
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    RESTARTING = "restarting"
    STOPPED = "stopped"


class StartupError(RuntimeError):
    """An engine could not be loaded when its pool started."""


@dataclass(frozen=True)
class PoolStats:
    workers: dict[WorkerState, int]
    queued: int
    in_flight: int
    live: int  # workers that can take a job (idle or busy)
    restarts: int
    crash_looping: bool
    jobs: dict[str, int]  # ended jobs by outcome: completed, cancelled, failed, lost
    rejected: dict[str, int]  # turned away: queue_full, predicted_wait, queue_stalled...
    reserved: int = 0  # places kept for refused requests' retries


class Pool(Protocol):
    """The engines behind one engine name. Use from one event loop."""

    @property
    def info(self) -> EngineInfo | None:
        """Set once `start` has returned."""

    @property
    def service_times(self) -> ServiceTimes: ...

    async def start(self) -> EngineInfo:
        """Load the engine everywhere it runs; raises StartupError if it cannot."""

    def synthesize(
        self,
        request: SynthesisRequest,
        output: OutputSpec,
        retry_key: Hashable | None = None,
        sender: Hashable = None,
    ) -> AsyncGenerator[EncodedChunk]:
        """Run the request and yield its audio as encoded; closing early stops the job.
        `retry_key` identifies it across a retry; `sender` is whom admission is fair between."""

    async def clone(self, prompt: PcmChunk) -> bytes: ...

    def stats(self) -> PoolStats:
        """A snapshot for /readyz and /metrics; never blocks."""

    async def close(self) -> None: ...
