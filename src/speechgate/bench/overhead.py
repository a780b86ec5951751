"""The gateway's overhead on time to first audio, measured in pairs.

Each short text is spoken through the server (one request at a time, so nothing queues), then
by the same engine in a process pinned to the server's first worker core, alternately. The
machine's speed drifts by tens of percent over minutes; pairs taken a few milliseconds apart
see the same machine, so the median of their differences is the gateway's cost, not drift.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection

import httpx

from speechgate.bench.audio import audio_offset
from speechgate.bench.inprocess import EngineJob, load_pinned, speak
from speechgate.engines.base import SynthesisRequest


@dataclass(frozen=True)
class Overhead:
    pairs: int
    server_ttfa_p50_ms: float
    inprocess_ttfa_p50_ms: float
    paired_difference_p50_ms: float


def _engine_process(job: EngineJob, conn: Connection) -> None:
    engine, voice = load_pinned(job)
    conn.send("ready")
    while (text := conn.recv()) is not None:
        sample = speak(engine, SynthesisRequest(text, voice), job.output)
        conn.send(sample.ttfa)
    engine.close()


def _timed_request(
    client: httpx.Client, url: str, body: Mapping[str, object], offset: int
) -> float:
    """Seconds from sending to the first audio bytes past any container header."""
    sent = time.monotonic()
    with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        received, ttfa = 0, None
        # Read to the end: the worker stays busy until then, and the next pair must not wait.
        for data in response.iter_bytes():
            received += len(data)
            if ttfa is None and received > offset:
                ttfa = time.monotonic() - sent
    if ttfa is None:
        raise RuntimeError("the server sent no audio")
    return ttfa


def measure_overhead(url: str, model: str, job: EngineJob, pairs: int = 60) -> Overhead:
    """`pairs` server/in-process pairs over the short texts of `job` (warm-up excluded)."""
    texts = [text.text for text in job.texts if text.kind == "short"]
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_engine_process, args=(job, child), daemon=True)
    process.start()
    child.close()
    offset = audio_offset(job.output.format)
    server, local = [], []
    try:
        parent.recv()  # loaded and warmed up
        with httpx.Client(timeout=60) as client:
            for index in range(pairs + len(texts)):
                text = texts[index % len(texts)]
                body = {
                    "model": model,
                    "voice": job.voice,
                    "input": text,
                    "response_format": job.output.format.value,
                }
                server_ttfa = _timed_request(client, url, body, offset)
                parent.send(text)
                local_ttfa = parent.recv()
                if index >= len(texts):  # the first round warms the server up too
                    server.append(server_ttfa)
                    local.append(local_ttfa)
        parent.send(None)
    finally:
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
    return Overhead(
        pairs=len(server),
        server_ttfa_p50_ms=statistics.median(server) * 1000,
        inprocess_ttfa_p50_ms=statistics.median(local) * 1000,
        paired_difference_p50_ms=statistics.median(
            remote - inproc for remote, inproc in zip(server, local, strict=True)
        )
        * 1000,
    )
