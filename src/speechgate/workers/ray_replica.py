"""The code that runs inside a Ray Serve replica: one engine, one job at a time.

The Ray counterpart of `speechgate.workers.process`: jobs are rendered with `pipeline.render`,
so the gateway only relays encoded bytes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import ray

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import (
    EngineConfig,
    EngineInfo,
    SynthesisRequest,
    VoiceCloner,
    estimated_speed,
)
from speechgate.pipeline import EncodedChunk, OutputSpec, render
from speechgate.text.segment import SegmentLimits
from speechgate.workers.process import limit_threads


@dataclass(frozen=True)
class Started:
    """The first item of every speech stream: the job has reached a replica, whose actor
    name lets the gateway kill it when the job outlives its timeout."""

    pid: int
    actor_name: str


class EngineReplica:
    """One loaded engine in a Ray actor. Serve calls these methods; see `RayPool`."""

    def __init__(self, config: EngineConfig) -> None:
        # One thread for every engine call: engines need not be thread-safe, and the event
        # loop stays free to hear a cancellation.
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="engine")
        limit_threads(config.threads)
        from speechgate.engines import load_engine

        self._engine = load_engine(config)
        self._ended = dict.fromkeys(("completed", "cancelled", "failed"), 0)

    def info(self) -> EngineInfo:
        return EngineInfo.of(self._engine)

    async def synthesize(
        self, request: SynthesisRequest, output: OutputSpec
    ) -> AsyncGenerator[Started | EncodedChunk]:
        """Started, then the encoded audio; cancelled by Serve when the caller leaves."""
        loop = asyncio.get_running_loop()
        yield Started(os.getpid(), ray.get_runtime_context().get_actor_name() or "")
        limits = SegmentLimits.for_speed(estimated_speed(self._engine))
        chunks = render(self._engine, request, output, limits=limits)
        outcome = "cancelled"  # unless it runs to its end or fails
        try:
            while True:
                chunk = await loop.run_in_executor(self._thread, next, chunks, None)
                if chunk is None:
                    outcome = "completed"
                    return
                yield chunk
        except Exception:
            outcome = "failed"
            raise
        finally:
            self._ended[outcome] += 1
            # Runs after the step still running.
            self._thread.submit(chunks.close)

    def jobs(self) -> dict[str, int]:
        """How this replica's speech jobs ended, by outcome."""
        return dict(self._ended)

    async def clone(self, prompt: PcmChunk) -> bytes:
        engine = self._engine
        if not isinstance(engine, VoiceCloner):
            raise ValueError(f"engine {engine.name!r} cannot clone voices")
        return await asyncio.get_running_loop().run_in_executor(self._thread, engine.clone, prompt)

    def __del__(self) -> None:
        engine = getattr(self, "_engine", None)  # absent if the engine failed to load
        if engine is not None:
            self._thread.submit(engine.close).result()
        self._thread.shutdown()
