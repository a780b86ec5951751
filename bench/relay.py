"""What a relay hop costs: time to first audio through speechgate -> speechgate versus direct.

    PYTHONPATH=. .venv/bin/python bench/relay.py [--pairs 200] [--engine espeak] [--format pcm]

(PYTHONPATH=. for the test helpers it reuses.)

Starts two `speechgate serve` processes: the upstream, with the engine, and a front whose
routes file sends model "relay" to the upstream (a remote provider, one pooled connection).
Then it asks the same text alternately of the upstream directly and of the front (pairs, so
drift cancels out), one request at a time, and prints p50/p99 of the time to the first byte
of audio each way, and of the per-pair difference (the hop's added latency).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
from tests.helpers.server import free_port

TEXT = "The committee met on Tuesday to review the plan."
ROUTES = """
providers:
  upstream: {{kind: remote, base_url: "{upstream}/v1", model: {engine}}}
routes:
  relay: {{providers: {{upstream: 100}}}}
"""


@contextmanager
def serve(engine: str, workers: int, data_dir: Path, **env: str) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "speechgate.cli", "serve", "--port", str(port)]
    command += ["--engine", engine, "--workers", str(workers)]
    environment = {**os.environ, "SPEECHGATE_DATA_DIR": str(data_dir), **env}
    with subprocess.Popen(
        command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    ) as server:
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{url}/readyz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server on {url} did not start")
                time.sleep(0.1)
            yield url
        finally:
            server.terminate()


def ttfa(client: httpx.Client, url: str, model: str, fmt: str) -> float:
    body = {"model": model, "voice": "alloy", "input": TEXT, "response_format": fmt}
    sent = time.perf_counter()
    with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        first = None
        # Read it all: the next request should find an idle pool.
        for chunk in response.iter_bytes():
            if chunk and first is None:
                first = time.perf_counter() - sent
    if first is None:
        raise RuntimeError("no audio")
    return first


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--engine", default="espeak")
    parser.add_argument("--format", default="pcm")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        upstream = stack.enter_context(serve(args.engine, args.workers, scratch / "up"))
        routes = scratch / "routes.yaml"
        routes.write_text(ROUTES.format(upstream=upstream, engine=args.engine))
        front = stack.enter_context(
            serve(args.engine, 1, scratch / "front", SPEECHGATE_ROUTING__ROUTES_FILE=str(routes))
        )
        client = stack.enter_context(httpx.Client(timeout=60))
        for _ in range(10):  # warm-up: connections, worker caches
            ttfa(client, upstream, args.engine, args.format)
            ttfa(client, front, "relay", args.format)
        direct, relayed = [], []
        for _ in range(args.pairs):
            direct.append(ttfa(client, upstream, args.engine, args.format))
            relayed.append(ttfa(client, front, "relay", args.format))

    added = [r - d for d, r in zip(direct, relayed, strict=True)]
    print(f"{args.pairs} pairs, {args.engine}, {args.format}, one request at a time")
    print(f"{'time to first audio':<24}{'p50 ms':>10}{'p99 ms':>10}")
    for name, values in (("direct", direct), ("relay hop", relayed), ("added (paired)", added)):
        p50, p99 = percentile(values, 50) * 1000, percentile(values, 99) * 1000
        print(f"{name:<24}{p50:>10.2f}{p99:>10.2f}")
    ratio = statistics.median(relayed) / statistics.median(direct)
    print(f"median ratio relay/direct: {ratio:.2f}")


if __name__ == "__main__":
    main()
