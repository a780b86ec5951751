"""A repeated prompt through HTTP: first audio on a phrase-cache hit, per format.

    PYTHONPATH=src .venv/bin/python bench/phrase_cache.py --engine piper --requests 200
    PYTHONPATH=src .venv/bin/python bench/phrase_cache.py --engine piper --old ../main/src

Starts a server (`--engine`, its defaults otherwise; with `--old`, a second one from that
checkout's sources beside it), speaks the prompt once in each format (a miss, then the first
hit of each format), then takes `--requests` rounds, one request at a time: in each round every
server is sent `GET /readyz` (the floor of any request on the machine at that moment) and the
prompt in each format, the order of servers and formats turning from round to round, timing the
first byte of audio (a WAV header counts) of each. Prints p50, p90 and p99 per format and
server.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import numpy as np
from loopback_server import speechgate_serve

PROMPT = "Sorry, I didn't catch that. Could you say it again?"
FORMATS = ("pcm", "mp3", "opus", "wav")


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


def ready(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    client.get(f"{url}/readyz").raise_for_status()
    return time.perf_counter() - started


@contextmanager
def server(engine: str, source: str | None) -> Iterator[str]:
    env = {
        "SPEECHGATE_ENGINES": engine,
        "SPEECHGATE_DEFAULT_ENGINE": engine,
        "SPEECHGATE_DATA_DIR": tempfile.mkdtemp(prefix="speechgate-phrase-cache-"),
        "SPEECHGATE_USAGE__METERING": "false",
        # Its name before the settings were grouped, for an older checkout beside this one.
        "SPEECHGATE_USAGE_METERING": "false",
    }
    if source is not None:
        env["PYTHONPATH"] = os.path.abspath(source)
    with speechgate_serve(env) as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="fake")
    parser.add_argument("--voice", default="alloy")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--old", help="another checkout's src directory, served beside this one")
    args = parser.parse_args()
    with ExitStack() as stack:
        urls = {"new": stack.enter_context(server(args.engine, None))}
        if args.old:
            urls["old"] = stack.enter_context(server(args.engine, args.old))
        client = stack.enter_context(httpx.Client(timeout=120))
        body: dict[str, object] = {"model": args.engine, "voice": args.voice, "input": PROMPT}
        for name, url in urls.items():
            for fmt in FORMATS:
                seconds, outcome = first_byte(client, url, {**body, "response_format": fmt})
                print(f"{name} first {fmt} ({outcome}): {seconds * 1000:.1f} ms")
        times: dict[tuple[str, str], list[float]] = {}
        outcomes: dict[tuple[str, str], set[str]] = {}
        names = list(urls)
        for round_ in range(args.requests):
            turn = round_ % len(names)
            for name in names[turn:] + names[:turn]:
                url = urls[name]
                times.setdefault((name, "readyz"), []).append(ready(client, url))
                shift = round_ % len(FORMATS)
                for fmt in FORMATS[shift:] + FORMATS[:shift]:
                    seconds, outcome = first_byte(client, url, {**body, "response_format": fmt})
                    times.setdefault((name, fmt), []).append(seconds)
                    outcomes.setdefault((name, fmt), set()).add(outcome)
        for what in ("readyz", *FORMATS):
            line = [f"{what:6s}"]
            for name in names:
                p50, p90, p99 = np.percentile(times[name, what], [50, 90, 99]) * 1000
                seen = ",".join(sorted(outcomes.get((name, what), set())))
                line.append(f"{name} p50 {p50:5.1f} p90 {p90:5.1f} p99 {p99:5.1f} ms {seen:4s}")
            print("  ".join(line))


if __name__ == "__main__":
    main()
