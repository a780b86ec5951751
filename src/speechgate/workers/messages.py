"""Typed messages on the pipe between the gateway and one worker process.

Gateway -> worker: `Job`, `Cancel`, `Shutdown`.
Worker -> gateway: `Ready` or `StartupFailed` once, then for every `Job` any number of
`Chunk`s and exactly one terminal `Done` or `Failed`. A worker is free again only when the
terminal message of its job has arrived, so the gateway never has two jobs on one worker.
"""

from __future__ import annotations

from dataclasses import dataclass

from speechgate.engines.base import Engine, SynthesisRequest, Voice
from speechgate.pipeline import EncodedChunk, OutputSpec


@dataclass(frozen=True)
class EngineInfo:
    """What a loaded engine can do, reported by each worker once it is ready."""

    name: str
    sample_rate: int
    supports_instructions: bool
    voices: tuple[Voice, ...]

    @classmethod
    def of(cls, engine: Engine) -> EngineInfo:
        return cls(
            engine.name, engine.sample_rate, engine.supports_instructions, tuple(engine.voices())
        )


@dataclass(frozen=True)
class Job:
    job_id: int
    request: SynthesisRequest
    output: OutputSpec


@dataclass(frozen=True)
class Cancel:
    job_id: int


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class Ready:
    info: EngineInfo


@dataclass(frozen=True)
class StartupFailed:
    message: str


@dataclass(frozen=True)
class Chunk:
    job_id: int
    audio: EncodedChunk


@dataclass(frozen=True)
class Done:
    job_id: int
    cancelled: bool = False


@dataclass(frozen=True)
class Failed:
    job_id: int
    message: str


ToWorker = Job | Cancel | Shutdown
FromWorker = Ready | StartupFailed | Chunk | Done | Failed
