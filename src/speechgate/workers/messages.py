"""Typed messages on the pipe between the gateway and one worker process.

Gateway -> worker: `Job` or `CloneJob`, `Cancel`, `Pause`, `Resume`, `Width`, `Shutdown`.
Worker -> gateway: `Ready` or `StartupFailed` once, then `Heartbeat`s throughout, and for every
`Job` any number of `Chunk`s (for a `CloneJob`, one `Cloned`) and exactly one terminal `Done` or
`Failed`, which alone frees the job's slot. Messages about an ended job are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineInfo, SynthesisRequest
from speechgate.pipeline import EncodedChunk, OutputSpec


@dataclass(frozen=True)
class Job:
    """Speak `request` with `threads` to start with. `group`: its sender, between whom (not
    between jobs) the worker shares its time fairly."""

    job_id: int
    request: SynthesisRequest
    output: OutputSpec
    threads: int = 1
    group: int = 0


@dataclass(frozen=True)
class CloneJob:
    """Compute the voice state of `prompt` (mono, at the engine's rate)."""

    job_id: int
    prompt: PcmChunk
    threads: int = 1


@dataclass(frozen=True)
class Cancel:
    job_id: int


@dataclass(frozen=True)
class Pause:
    """Run no more of job `job_id` until `Resume`: its reader has not taken what it has."""

    job_id: int


@dataclass(frozen=True)
class Resume:
    job_id: int


@dataclass(frozen=True)
class Width:
    """Compute with `threads` threads from the next step on (the gateway has already moved
    the worker's threads onto the matching cores)."""

    threads: int


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class WarmUp:
    """How the worker's warm-up synthesis went."""

    busy: float
    audio_seconds: float
    characters: int


@dataclass(frozen=True)
class Ready:
    info: EngineInfo
    warm_up: WarmUp | None = None  # None: the engine could not speak its warm-up text


@dataclass(frozen=True)
class Heartbeat:
    """The worker is alive, whatever its engine is doing; silent for `stall_timeout`, wedged."""


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
    busy: float = 0.0
    """Seconds of the worker's time in the job's own steps."""


@dataclass(frozen=True)
class Failed:
    job_id: int
    message: str


ToWorker = Job | CloneJob | Cancel | Pause | Resume | Width | Shutdown
FromWorker = Ready | StartupFailed | Heartbeat | Chunk | Cloned | Done | Failed
