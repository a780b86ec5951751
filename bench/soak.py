"""Soak: many requests, and how the gateway's (and workers') memory grows per request.

    PYTHONPATH=src:. .venv/bin/python bench/soak.py --requests 4000

Starts `speechgate serve` with the espeak engine (light on CPU, so the gateway's own cost
shows) on a fresh data directory, or, with `--url` and `--server-pid`, soaks a running one.
Resident memory (RSS) is sampled every `--sample-every` requests; the growth per request is
over the requests after `--warmup` (caches and allocators filling up first are not growth),
both end to end and as the slope of a least-squares line through the samples (less sensitive
to one allocator step). Issue 15's bound for the gateway: under 0.1 KB per request. Nothing is
asserted: it prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import psutil

from speechgate.bench import child
from speechgate.bench.texts import TEXTS


def rss(pid: int) -> dict[str, int]:
    """Resident bytes of the server and of each of its workers."""
    gateway = psutil.Process(pid)
    sizes = {"gateway": gateway.memory_info().rss}
    for index, worker in enumerate(gateway.children(recursive=True)):
        if "resource_tracker" not in " ".join(worker.cmdline()):
            sizes[f"worker {index} (pid {worker.pid})"] = worker.memory_info().rss
    return sizes


async def soak(
    url: str, model: str, count: int, concurrency: int, pid: int, every: int
) -> tuple[dict[int, int], dict[int, dict[str, int]]]:
    """Send `count` requests from `concurrency` clients; the statuses, and RSS by process
    after every `every` requests."""
    statuses: dict[int, int] = {}
    samples = {0: rss(pid)}
    texts = itertools.cycle(TEXTS)
    remaining = iter(range(count))
    done = 0

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal done
        for _ in remaining:
            body = {
                "model": model,
                "voice": "alloy",
                "input": next(texts).text,
                "response_format": "mp3",
            }
            async with http.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
                async for _ in response.aiter_bytes():
                    pass
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            done += 1
            if done % every == 0 or done == count:
                samples[done] = rss(pid)

    async with httpx.AsyncClient(timeout=120) as http:
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
    return statuses, samples


def report(samples: dict[int, dict[str, int]], warmup: int) -> None:
    after = {done: sizes for done, sizes in samples.items() if done >= warmup}
    first, last = min(after), max(after)
    span = f"{first}..{last}"
    print(
        f"{'process':<26}{'RSS at ' + str(first):>14}{'RSS at ' + str(last):>14}"
        f"{'KB/request ' + span:>24}{'fit':>9}"
    )
    for name, start in samples[first].items():
        points = np.array([(done, sizes[name]) for done, sizes in after.items() if name in sizes])
        end = samples[last].get(name, float("nan"))
        per_request = (end - start) / (last - first) if last > first else float("nan")
        slope = float(np.polyfit(points[:, 0], points[:, 1], 1)[0]) if len(points) > 2 else 0.0
        print(
            f"{name:<26}{start / 2**20:>11.1f} MB{end / 2**20:>11.1f} MB"
            f"{per_request / 1000:>+24.3f}{slope / 1000:>+9.3f}"
        )


@contextmanager
def server(engine: str, workers: int | None) -> Iterator[tuple[str, int]]:
    port = child.free_port()
    work = Path(tempfile.mkdtemp(prefix="speechgate-soak-"))
    settings = {
        "SPEECHGATE_ENGINES": engine,
        "SPEECHGATE_DEFAULT_ENGINE": engine,
        "SPEECHGATE_DATA_DIR": str(work / "data"),
    }
    if workers is not None:
        settings["SPEECHGATE_POOL__WORKERS"] = str(workers)
    command = [sys.executable, "-m", "speechgate.cli", "serve", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    env = child.clean_env(**settings)
    with child.child_server(command, env, f"{url}/readyz", work / "server.log") as pid:
        yield url, pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=4000, help="all of them, warm-up too")
    parser.add_argument("--warmup", type=int, default=1000, help="requests before growth counts")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--sample-every", type=int, default=100, help="requests between samples")
    parser.add_argument("--engine", default="espeak", help="the engine of the server started")
    parser.add_argument("--workers", type=int, default=None, help="of the server started")
    parser.add_argument("--model", default="tts-1")
    parser.add_argument("--url", default=None, help="a running server instead of starting one")
    parser.add_argument("--server-pid", type=int, default=None, help="the running server's")
    args = parser.parse_args()
    if args.requests <= args.warmup:
        parser.error("--requests must be more than --warmup")
    if args.url is not None and args.server_pid is None:
        parser.error("--url needs --server-pid (whose memory to watch)")

    def run(url: str, pid: int) -> None:
        started = time.monotonic()
        statuses, samples = asyncio.run(
            soak(url, args.model, args.requests, args.concurrency, pid, args.sample_every)
        )
        elapsed = time.monotonic() - started
        print(
            f"{args.requests} requests in {elapsed:.0f} s at concurrency {args.concurrency}: "
            f"statuses {statuses}"
        )
        report(samples, args.warmup)

    if args.url is not None:
        run(args.url, args.server_pid)
    else:
        with server(args.engine, args.workers) as (url, pid):
            run(url, pid)


if __name__ == "__main__":
    main()
