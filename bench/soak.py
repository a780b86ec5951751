"""Soak: N requests against a running server; the gateway's and workers' memory before/after.

    python bench/soak.py --url http://127.0.0.1:8123 --server-pid PID --requests 2000

Memory is resident set size (RSS) after a warm-up of 100 requests and at the end, per process.
Flat means no growth beyond allocator noise (a few MB), whatever the request count.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time

import httpx
import psutil

from speechgate.bench.texts import TEXTS


def rss_mb(pid: int) -> dict[str, float]:
    gateway = psutil.Process(pid)
    sizes = {"gateway": gateway.memory_info().rss / 2**20}
    for index, child in enumerate(gateway.children(recursive=True)):
        if "resource_tracker" not in " ".join(child.cmdline()):
            sizes[f"worker {index} (pid {child.pid})"] = child.memory_info().rss / 2**20
    return sizes


async def run(url: str, model: str, count: int, concurrency: int) -> dict[int, int]:
    statuses: dict[int, int] = {}
    texts = itertools.cycle(TEXTS)
    remaining = iter(range(count))

    async def client(http: httpx.AsyncClient) -> None:
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

    async with httpx.AsyncClient(timeout=120) as http:
        await asyncio.gather(*(client(http) for _ in range(concurrency)))
    return statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--model", default="tts-1")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    asyncio.run(run(args.url, args.model, 100, args.concurrency))
    before = rss_mb(args.server_pid)
    started = time.monotonic()
    statuses = asyncio.run(run(args.url, args.model, args.requests, args.concurrency))
    elapsed = time.monotonic() - started
    after = rss_mb(args.server_pid)
    print(
        f"{args.requests} requests in {elapsed:.0f} s at concurrency {args.concurrency}: "
        f"statuses {statuses}"
    )
    print(f"{'process':<28}{'RSS after warm-up':>20}{'RSS at end':>14}{'change':>10}")
    for name, size in before.items():
        end = after.get(name, float("nan"))
        print(f"{name:<28}{size:>17.1f} MB{end:>11.1f} MB{end - size:>+8.1f} MB")


if __name__ == "__main__":
    main()
