"""The gateway's overhead on time to first audio, measured two ways in one run.

Paired: each short text through the server, then by the same engine in a process pinned to
the server's first worker core, alternately, so the median of the differences is the gateway's
cost and not the machine's drift (though it holds a fixed offset between processes).

Per request: the client's time to first audio minus the engine's own (`Server-Timing`, timed
in the worker around the same `render` call), with no offset between processes. Both time the
server with `Probe`, a minimal client, so a client library's own time does not count.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection

from speechgate.bench.audio import audio_offset
from speechgate.bench.inprocess import EngineJob, load_pinned, speak
from speechgate.bench.probe import Probe
from speechgate.bench.texts import Text
from speechgate.engines.base import SynthesisRequest
from speechgate.text.segment import segment
from speechgate.workers.forking import CONTEXT, preload_engines


@dataclass(frozen=True)
class Overhead:
    pairs: int
    server_ttfa_p50_ms: float
    inprocess_ttfa_p50_ms: float
    paired_difference_p50_ms: float
    worker_engine_ttfa_p50_ms: float | None = None
    per_request_p50_ms: float | None = None


def engine_timing(header: str | None) -> float | None:
    """Seconds of `engine;dur=<ms>` in a `Server-Timing` header, if there."""
    for metric in (header or "").split(","):
        name, *params = (part.strip() for part in metric.split(";"))
        if name == "engine":
            for param in params:
                key, _, value = param.partition("=")
                if key == "dur":
                    return float(value) / 1000
    return None


def first_audio_texts(texts: Sequence[Text]) -> list[str]:
    """What the pairs speak: the short texts, else each text's first segment (what its first
    audio is made of)."""
    return [text.text for text in texts if text.kind == "short"] or [
        segment(text.text)[0] for text in texts
    ]


def _engine_process(job: EngineJob, conn: Connection) -> None:
    engine, voice = load_pinned(job)
    conn.send("ready")
    while (text := conn.recv()) is not None:
        sample = speak(engine, SynthesisRequest(text, voice), job.output)
        conn.send(sample.ttfa)
    engine.close()


def _timed_request(
    probe: Probe, body: Mapping[str, object], offset: int
) -> tuple[float, float | None]:
    """Seconds to the first audio bytes, and the engine's part of it as the server reports.
    The whole body is read, so the next pair does not wait for a busy worker."""
    response = probe.post_json("/v1/audio/speech", body, skip=offset)
    if response.status != 200:
        raise RuntimeError(f"the server answered {response.status}: {response.body[:200]!r}")
    if response.first_byte_after is None:
        raise RuntimeError("the server sent no audio")
    return response.first_byte_after, engine_timing(response.headers.get("server-timing"))


def measure_overhead(
    url: str, model: str, job: EngineJob, pairs: int = 100, server_voice: str | None = None
) -> Overhead:
    """`pairs` server/in-process pairs, warm-up excluded; `server_voice` where the two sides
    name one voice differently (a clone)."""
    texts = first_audio_texts(job.texts)
    preload_engines([job.engine.name])
    parent, child = CONTEXT.Pipe()
    process = CONTEXT.Process(target=_engine_process, args=(job, child), daemon=True)
    process.start()
    child.close()
    offset = audio_offset(job.output.format)
    server, local, engine = [], [], []
    try:
        parent.recv()  # loaded and warmed up
        with Probe(url) as probe:
            for index in range(pairs + len(texts)):
                text = texts[index % len(texts)]
                body = {
                    "model": model,
                    "voice": server_voice or job.voice,
                    "input": text,
                    "response_format": job.output.format.value,
                }
                server_ttfa, engine_ttfa = _timed_request(probe, body, offset)
                parent.send(text)
                local_ttfa = parent.recv()
                if index >= len(texts):  # the first round warms the server up too
                    server.append(server_ttfa)
                    local.append(local_ttfa)
                    if engine_ttfa is not None:
                        engine.append((server_ttfa, engine_ttfa))
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
        worker_engine_ttfa_p50_ms=(
            statistics.median(e for _, e in engine) * 1000 if engine else None
        ),
        per_request_p50_ms=(
            statistics.median(remote - e for remote, e in engine) * 1000 if engine else None
        ),
    )
