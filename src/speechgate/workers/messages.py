"""Typed messages on the pipe between the gateway and one worker process.

Gateway -> worker: `Job` or `CloneJob`, `Cancel`, `Shutdown`.
Worker -> gateway: `Ready` or `StartupFailed` once, then for every `Job` any number of
`Chunk`s (for a `CloneJob`, one `Cloned`) and exactly one terminal `Done` or `Failed`. A
worker is free again only when the terminal message of its job has arrived, so the gateway
never has two jobs on one worker.
"""

from __future__ import annotations

from dataclasses import dataclass

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineInfo, SynthesisRequest
from speechgate.pipeline import EncodedChunk, OutputSpec


@dataclass(frozen=True)
class Job:
    job_id: int
    request: SynthesisRequest
    output: OutputSpec


@dataclass(frozen=True)
class CloneJob:
    """Compute the voice state of `prompt` (mono, at the engine's rate)."""

    job_id: int
    prompt: PcmChunk


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
class Cloned:
    job_id: int
    state: bytes


@dataclass(frozen=True)
class Done:
    job_id: int
    cancelled: bool = False


@dataclass(frozen=True)
class Failed:
    job_id: int
    message: str


ToWorker = Job | CloneJob | Cancel | Shutdown
FromWorker = Ready | StartupFailed | Chunk | Cloned | Done | Failed
