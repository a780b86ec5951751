"""A repeated prompt through HTTP: first audio on a phrase-cache hit, per format.

    .venv/bin/python bench/phrase_cache.py --engine kokoro --requests 200

Starts a server (`--engine`, its defaults otherwise), speaks the prompt once (a miss, which
renders it), then sends it `--requests` times in each format, one at a time, timing the first
byte of audio (a WAV header counts) of each. Prints p50 and p99 per format, the miss, and
`GET /readyz` as the floor of any request on the machine at the time.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import httpx
import numpy as np
from loopback_server import speechgate_serve

PROMPT = "Sorry, I didn't catch that. Could you say it again?"


def first_byte(client: httpx.Client, url: str, body: dict[str, object]) -> tuple[float, str]:
    started = time.perf_counter()
    elapsed: float | None = None
    with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for data in response.iter_bytes():
            if data and elapsed is None:
                elapsed = time.perf_counter() - started
        assert elapsed is not None
        return elapsed, response.headers.get("x-speechgate-cache", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="fake")
    parser.add_argument("--voice", default="alloy")
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    env = {
        "SPEECHGATE_ENGINES": args.engine,
        "SPEECHGATE_DEFAULT_ENGINE": args.engine,
        "SPEECHGATE_DATA_DIR": tempfile.mkdtemp(prefix="speechgate-phrase-cache-"),
        "SPEECHGATE_USAGE__METERING": "false",
    }
    with speechgate_serve(env) as url, httpx.Client(timeout=120) as client:
        body: dict[str, object] = {"model": args.engine, "voice": args.voice, "input": PROMPT}
        miss, outcome = first_byte(client, url, {**body, "response_format": "pcm"})
        print(f"first request ({outcome}): {miss * 1000:.1f} ms")
        # The floor on this machine now: a request that does no speech at all.
        floor = []
        for _ in range(args.requests):
            started = time.perf_counter()
            client.get(f"{url}/readyz")
            floor.append((time.perf_counter() - started) * 1000)
        p50, p99 = np.percentile(floor, [50, 99])
        print(f"GET /readyz p50 {p50:.1f} ms  p99 {p99:.1f} ms")
        for fmt in ("pcm", "mp3", "opus", "wav"):
            times, outcomes = [], set()
            for _ in range(args.requests):
                seconds, outcome = first_byte(client, url, {**body, "response_format": fmt})
                times.append(seconds * 1000)
                outcomes.add(outcome)
            p50, p99 = np.percentile(times, [50, 99])
            print(f"{fmt:5s} {sorted(outcomes)} p50 {p50:.1f} ms  p99 {p99:.1f} ms")


if __name__ == "__main__":
    main()
