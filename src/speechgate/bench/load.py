"""The HTTP load generator: closed-loop clients at fixed concurrency levels, no retries."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx

from speechgate.audio.formats import AudioFormat
from speechgate.bench.audio import audio_offset, audio_seconds
from speechgate.bench.cpu import CpuMeter
from speechgate.bench.memory import MemoryMeter
from speechgate.bench.stats import RunStats, Sample, summarize
from speechgate.bench.texts import TEXTS, Text


@dataclass(frozen=True)
class LoadConfig:
    """What to send. Exactly one of `requests_per_level` and `duration` (seconds per level)."""

    url: str
    model: str = "tts-1"
    voice: str = "alloy"
    format: AudioFormat = AudioFormat.WAV
    levels: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    requests_per_level: int | None = None
    duration: float | None = 10.0
    api_key: str | None = None
    texts: Sequence[Text] = field(default=TEXTS)
    warmup: int = 4
    timeout: float = 300.0
    server_pid: int | None = None

    def __post_init__(self) -> None:
        if (self.requests_per_level is None) == (self.duration is None):
            raise ValueError("give exactly one of requests_per_level and duration")
        if not self.levels or min(self.levels) < 1:
            raise ValueError(f"levels must be positive; got {self.levels}")
        if not self.texts:
            raise ValueError("the text set is empty")


@dataclass(frozen=True)
class LevelRun:
    """One level; with a server pid, its process tree's resident memory (peak and at the end)."""

    stats: RunStats
    samples: list[Sample]
    rss_peak: int | None = None
    rss_end: int | None = None


OnSample = Callable[[int, Sample, float], None]
"""Progress hook: (concurrency, sample, seconds since the level started)."""

Send = Callable[[httpx.AsyncClient, "LoadConfig", Text], Awaitable[tuple[Sample, float]]]
"""One request, read to the end: the sample and, for a 429, the seconds to wait."""


def _retry_after(response: httpx.Response) -> float:
    ms = response.headers.get("retry-after-ms")
    seconds = response.headers.get("retry-after")
    try:
        return float(ms) / 1000.0 if ms else float(seconds or 1.0)
    except ValueError:
        return 1.0


async def send(client: httpx.AsyncClient, config: LoadConfig, text: Text) -> tuple[Sample, float]:
    """One request to OpenAI's route, read to the end, as a `Send`."""
    body = {
        "model": config.model,
        "input": text.text,
        "voice": config.voice,
        "response_format": config.format.value,
    }
    offset = audio_offset(config.format)
    started = time.monotonic()
    ttfa: float | None = None
    try:
        async with client.stream("POST", "/v1/audio/speech", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                retry = _retry_after(response) if response.status_code == 429 else 0.0
                return Sample(text.kind, response.status_code, time.monotonic() - started), retry
            parts: list[bytes] = []
            received = 0
            async for part in response.aiter_raw():
                received += len(part)
                parts.append(part)
                if ttfa is None and received > offset:
                    ttfa = time.monotonic() - started
            latency = time.monotonic() - started
            header = response.headers.get("x-speechgate-time-to-first-audio-ms")
    except httpx.HTTPError as error:
        latency = time.monotonic() - started
        return Sample(text.kind, 0, latency, ttfa, error=type(error).__name__), 0.0
    data = b"".join(parts)
    seconds = (
        audio_seconds(data, config.format)
        if config.format in (AudioFormat.WAV, AudioFormat.PCM)
        # Off the loop, so other clients' clocks stay true.
        else await asyncio.to_thread(audio_seconds, data, config.format)
    )
    return Sample(
        text.kind,
        200,
        latency,
        ttfa,
        seconds,
        server_ttfa=float(header) / 1000.0 if header else None,
    ), 0.0


async def run_level(
    client: httpx.AsyncClient,
    config: LoadConfig,
    concurrency: int,
    on_sample: OnSample | None = None,
    send: Send = send,
) -> tuple[list[Sample], float]:
    """`concurrency` clients send back to back until the count or the duration is reached;
    the samples and the wall seconds."""
    issued = itertools.count()
    samples: list[Sample] = []
    started = time.monotonic()
    deadline = started + config.duration if config.duration is not None else None

    def more(index: int) -> bool:
        if config.requests_per_level is not None:
            return index < config.requests_per_level
        return deadline is not None and time.monotonic() < deadline

    async def client_loop() -> None:
        while more(index := next(issued)):
            sample, retry_after = await send(
                client, config, config.texts[index % len(config.texts)]
            )
            samples.append(sample)
            if on_sample is not None:
                on_sample(concurrency, sample, time.monotonic() - started)
            if retry_after:
                # Not retried, but a client coming straight back would steal the server's CPU.
                left = deadline - time.monotonic() if deadline is not None else retry_after
                await asyncio.sleep(max(0.0, min(retry_after, left)))

    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(client_loop())
    return samples, time.monotonic() - started


def make_client(config: LoadConfig, max_connections: int) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    return httpx.AsyncClient(
        base_url=config.url,
        headers=headers,
        timeout=config.timeout,
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=None),
    )


async def run_load(
    config: LoadConfig, on_sample: OnSample | None = None, send: Send = send
) -> list[LevelRun]:
    """Warm the server up (uncounted), then run every level in order."""
    meter = CpuMeter(config.server_pid)
    runs: list[LevelRun] = []
    async with make_client(config, max(*config.levels, config.warmup)) as client:
        # Each engine worker's first job pays for lazy initialisation (onnxruntime, caches).
        await asyncio.gather(
            *(
                send(client, config, config.texts[i % len(config.texts)])
                for i in range(config.warmup)
            )
        )
        for level in config.levels:
            memory = MemoryMeter(config.server_pid) if config.server_pid else None
            meter.start()
            async with memory.sampling() if memory else contextlib.nullcontext():
                samples, wall = await run_level(client, config, level, on_sample, send)
            stats = summarize(level, samples, wall, meter.stop())
            runs.append(
                LevelRun(
                    stats,
                    samples,
                    memory.peak if memory else None,
                    memory.last if memory else None,
                )
            )
    return runs
