"""Overload: 4x the workers of closed-loop clients, mixed 1 s and 8 s texts, retrying a 429
after its Retry-After. Checks admission by predicted wait (issue 15):

- zero 5xx;
- the admitted requests' first-audio p99 within `max_queue_wait` + the p99 service time of one
  job (measured first, with as many clients as workers: every job served at once);
- the share of retries, made after Retry-After, that are admitted (target: 80 % or more).

    PYTHONPATH=src:. .venv/bin/python bench/overload.py --engine piper --workers 2 \\
        --max-queue-wait 1 --duration 60

Starts `speechgate serve` as a child process with those settings (and the rest of the
`SPEECHGATE_*` environment), or, with `--url`, loads a running one (then give its
`--max-queue-wait` and `--workers` as it runs). Nothing is asserted: it prints a table and
exits 0 whatever it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from speechgate.audio.formats import AudioFormat
from speechgate.bench import child
from speechgate.bench.audio import audio_offset, wav_audio_seconds
from speechgate.bench.stats import percentile

# About 1 s and 8 s of speech at a natural rate (the table reports what each really gave).
TEXTS = {
    "1s": "Your order has shipped.",
    "8s": (
        "Turn left at the next intersection, then continue straight for about two miles. "
        "Your destination will be on the right, just past the gas station."
    ),
}


@dataclass
class Result:
    text: str
    status: int
    retry: bool  # a retry of a request refused with 429
    latency: float
    first_audio: float | None = None
    audio_seconds: float = 0.0
    retry_after: float = 0.0


async def speak(http: httpx.AsyncClient, model: str, kind: str, retry: bool) -> Result:
    body = {"model": model, "voice": "alloy", "input": TEXTS[kind], "response_format": "wav"}
    offset = audio_offset(AudioFormat.WAV)
    started = time.monotonic()
    first: float | None = None
    try:
        async with http.stream("POST", "/v1/audio/speech", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                after = float(response.headers.get("retry-after", 0) or 0)
                return Result(
                    kind, response.status_code, retry, time.monotonic() - started, None, 0.0, after
                )
            data = bytearray()
            async for part in response.aiter_raw():
                data += part
                if first is None and len(data) > offset:
                    first = time.monotonic() - started
    except httpx.HTTPError:
        return Result(kind, 0, retry, time.monotonic() - started)
    latency = time.monotonic() - started
    return Result(kind, 200, retry, latency, first, wav_audio_seconds(bytes(data)))


async def closed_loop(url: str, model: str, clients: int, seconds: float) -> list[Result]:
    """`clients` clients, each alternating 1 s and 8 s texts, until `seconds` have passed; a
    429 is retried (the same text) after its Retry-After, if that is before the end."""
    results: list[Result] = []
    deadline = time.monotonic() + seconds

    async def client(index: int, http: httpx.AsyncClient) -> None:
        kinds = ["1s", "8s"] if index % 2 else ["8s", "1s"]
        turn = 0
        retry = False
        while time.monotonic() < deadline:
            result = await speak(http, model, kinds[turn % 2], retry)
            results.append(result)
            retry = result.status == 429
            if retry:
                if time.monotonic() + result.retry_after >= deadline:
                    return
                await asyncio.sleep(result.retry_after)
            else:
                turn += 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as http:
        await asyncio.gather(*(client(index, http) for index in range(clients)))
    return results


@contextmanager
def server(engine: str, workers: int, max_queue_wait: float, queue_size: int) -> Iterator[str]:
    port = child.free_port()
    work = Path(tempfile.mkdtemp(prefix="speechgate-overload-"))
    env = child.clean_env(
        SPEECHGATE_ENGINES=engine,
        SPEECHGATE_DEFAULT_ENGINE=engine,
        SPEECHGATE_POOL__WORKERS=str(workers),
        SPEECHGATE_POOL__MAX_QUEUE_WAIT=str(max_queue_wait),
        SPEECHGATE_POOL__QUEUE_SIZE=str(queue_size),
        SPEECHGATE_DATA_DIR=str(work / "data"),
    )
    command = [sys.executable, "-m", "speechgate.cli", "serve", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with child.child_server(command, env, f"{url}/readyz", work / "server.log", timeout=120):
        yield url


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def report(service: list[Result], overload: list[Result], workers: int, wait: float) -> None:
    served = [r for r in service if r.status == 200]
    service_p99 = percentile([r.latency for r in served], 99)
    print(
        f"service, {workers} clients (no queue): {len(served)} jobs; time per job "
        f"p50 {ms(percentile([r.latency for r in served], 50))}, p99 {ms(service_p99)}"
    )
    for kind in TEXTS:
        audio = [r.audio_seconds for r in served if r.text == kind]
        if audio:
            print(f"  text {kind}: {sum(audio) / len(audio):.2f} s of audio")
    statuses: dict[int, int] = {}
    for r in overload:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    admitted = [r for r in overload if r.status == 200]
    first = [r.first_audio for r in admitted if r.first_audio is not None]
    p99 = percentile(first, 99)
    bound = wait + service_p99 if service_p99 is not None else None
    retries = [r for r in overload if r.retry]
    retried_in = sum(r.status == 200 for r in retries)
    five = sum(n for status, n in statuses.items() if status >= 500 or status == 0)
    audio = sum(r.audio_seconds for r in admitted)
    print(
        f"overload, {4 * workers} clients: {len(overload)} requests, statuses "
        + ", ".join(f"{s or 'error'}: {n}" for s, n in sorted(statuses.items()))
    )
    print(f"  5xx (and connection errors): {five}")
    print(
        f"  admitted first audio: p50 {ms(percentile(first, 50))}, p99 {ms(p99)}; bound "
        f"max_queue_wait {wait:g} s + service p99 {ms(service_p99)} = {ms(bound)}"
        + (f" (p99 / bound {p99 / bound:.2f})" if p99 is not None and bound else "")
    )
    share = f"{100 * retried_in / len(retries):.0f} %" if retries else "-"
    print(f"  retries after Retry-After: {len(retries)}, admitted {retried_in} ({share})")
    print(f"  audio served: {audio:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="piper")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-queue-wait", type=float, default=1.0)
    parser.add_argument("--queue-size", type=int, default=64, help="the count bound (a cap)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of overload")
    parser.add_argument(
        "--service-seconds",
        type=float,
        default=None,
        help="seconds of the service-time run first (default: a third of "
        "--duration; it also gives the server its first measurements)",
    )
    parser.add_argument("--url", default=None, help="a running server instead of starting one")
    args = parser.parse_args()
    service_seconds = args.service_seconds or args.duration / 3

    def run(url: str) -> None:
        service = asyncio.run(closed_loop(url, args.engine, args.workers, service_seconds))
        overload = asyncio.run(closed_loop(url, args.engine, 4 * args.workers, args.duration))
        print(f"{args.engine}, {args.workers} workers, max_queue_wait {args.max_queue_wait:g} s")
        report(service, overload, args.workers, args.max_queue_wait)

    if args.url:
        run(args.url)
    else:
        with server(args.engine, args.workers, args.max_queue_wait, args.queue_size) as url:
            run(url)


if __name__ == "__main__":
    main()
