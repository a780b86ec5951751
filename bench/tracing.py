"""What tracing costs a request: the fake engine's "Hi." through the server, traced and not.

    PYTHONPATH=.:src .venv/bin/python bench/tracing.py [--rounds 300] [--before PATH]

(PYTHONPATH=. for the test helpers it reuses.)

Starts `speechgate serve` (the fake engine, one worker) twice from this tree: tracing off,
and on, exporting to an OTLP/HTTP receiver on loopback (tests/helpers/otlp.py); with
`--before`, a third from another tree's `src` (the commit before tracing, say). Then asks each
in turn for the same short text, one request at a time (rounds, so drift cancels out), and
prints p50/p90 of the time to the whole answer (a few milliseconds: the gateway's own cost is
most of it) and to its first byte.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

import httpx
from loopback_server import speechgate_serve
from tests.helpers.otlp import OtlpReceiver

TEXT = "Hi."


def serve(source: Path, data_dir: Path, **env: str) -> AbstractContextManager[str]:
    """The fake engine, one worker, served from `source`."""
    return speechgate_serve(
        {
            "PYTHONPATH": str(source),
            "SPEECHGATE_DATA_DIR": str(data_dir),
            "SPEECHGATE_ENGINES": "fake",
            "SPEECHGATE_POOL__WORKERS": "1",
            **env,
        }
    )


def timed(client: httpx.Client, url: str) -> tuple[float, float]:
    """Seconds to the first byte of audio and to the whole answer."""
    body = {"model": "fake", "voice": "alloy", "input": TEXT, "response_format": "pcm"}
    sent = time.perf_counter()
    first = None
    with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            if chunk and first is None:
                first = time.perf_counter() - sent
    if first is None:
        raise RuntimeError("no audio")
    return first, time.perf_counter() - sent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--before", type=Path, help="another tree, served from its src/")
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent / "src"

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        receiver = stack.enter_context(OtlpReceiver())
        servers = {
            "tracing off": stack.enter_context(serve(here, scratch / "off")),
            "tracing on": stack.enter_context(
                serve(here, scratch / "on", SPEECHGATE_TRACING__OTLP_ENDPOINT=receiver.url)
            ),
        }
        if args.before is not None:
            servers["before"] = stack.enter_context(serve(args.before / "src", scratch / "b"))
        client = stack.enter_context(httpx.Client(timeout=60))
        for _ in range(20):  # warm-up: connections, worker caches
            for url in servers.values():
                timed(client, url)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
        for _ in range(args.rounds):
            for name, url in servers.items():
                times[name].append(timed(client, url))
        exported = len(receiver.spans())

    print(f"{args.rounds} rounds, fake engine, {TEXT!r}, pcm, one request at a time")
    print(f"{'':<14}{'whole p50 ms':>14}{'whole p90 ms':>14}{'first p50 ms':>14}")
    for name, values in times.items():
        whole = [total for _, total in values]
        first = [ttfa for ttfa, _ in values]
        print(
            f"{name:<14}{percentile(whole, 50) * 1000:>14.2f}"
            f"{percentile(whole, 90) * 1000:>14.2f}{percentile(first, 50) * 1000:>14.2f}"
        )
    print(f"spans the traced server had sent by the end: {exported}")


if __name__ == "__main__":
    main()
