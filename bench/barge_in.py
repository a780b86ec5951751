"""Barge-in against running servers: how soon after a dropped stream is the next request heard?

    SPEECHGATE_ENGINES=kokoro .venv/bin/speechgate serve --port 8765 &
    .venv/bin/python bench/barge_in.py --url http://127.0.0.1:8765 --model kokoro --rounds 3

A voice agent whose user speaks over it drops the stream it is playing and asks for a short
reply at once. Each round, one client: the short text on a server left idle for `--gap`
seconds (idle), then a paragraph (`speechgate.bench.LONG_TEXTS`) read for 0.3 s past its first
audio and dropped, and the short text at once (after barge-in). Prints each round's first-byte
times and their medians and means. Several `--url`s are measured round by round in turn (two
builds of speechgate side by side: this machine's speed drifts by a tenth within minutes).
Nothing here asserts anything: it reports.
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

from speechgate.bench import LONG_TEXTS

SHORT = "Sorry, go ahead."
HEARD_BEFORE_BARGING_IN = 0.3  # seconds past the paragraph's first audio


def first_byte(client: httpx.Client, model: str, text: str) -> float:
    """Seconds to the first audio byte of `text` (raw PCM: no header to skip)."""
    started = time.perf_counter()
    body = {"model": model, "input": text, "voice": "alloy", "response_format": "pcm"}
    with client.stream("POST", "/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for data in response.iter_bytes():
            if data:
                return time.perf_counter() - started
    raise RuntimeError("no audio")


def barge_in(url: str, model: str, text: str) -> None:
    """Read `text`'s stream until shortly after its first audio, then drop the connection."""
    body = {"model": model, "input": text, "voice": "alloy", "response_format": "pcm"}
    with (
        httpx.Client(base_url=url, timeout=120) as client,
        client.stream("POST", "/v1/audio/speech", json=body) as response,
    ):
        response.raise_for_status()
        for data in response.iter_bytes():
            if data:
                break
        time.sleep(HEARD_BEFORE_BARGING_IN)


def main() -> None:
    try:
        measure()
    except httpx.HTTPError as error:  # a server not there, or one that refused the request
        raise SystemExit(f"barge_in: {error.request.url}: {error}") from None


def measure() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", action="append", required=True, help="repeat to compare")
    parser.add_argument("--model", default="tts-1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap", type=float, default=8.0, help="idle seconds before 'idle'")
    args = parser.parse_args()
    results = {url: {"idle": [], "after barge-in": []} for url in args.url}
    clients = {url: httpx.Client(base_url=url, timeout=120) for url in args.url}
    for client in clients.values():
        first_byte(client, args.model, SHORT)  # warm-up
    for round_ in range(args.rounds):
        for url, client in clients.items():
            time.sleep(args.gap)
            idle = first_byte(client, args.model, SHORT)
            barge_in(url, args.model, LONG_TEXTS[round_ % len(LONG_TEXTS)].text)
            after = first_byte(client, args.model, SHORT)
            results[url]["idle"].append(idle)
            results[url]["after barge-in"].append(after)
            print(
                f"round {round_ + 1} {url}: idle {idle * 1000:.0f} ms, "
                f"after barge-in {after * 1000:.0f} ms",
                flush=True,
            )
    for url, measured in results.items():
        for name, times in measured.items():
            print(
                f"{url} {name}: p50 {statistics.median(times) * 1000:.0f} ms, "
                f"mean {statistics.mean(times) * 1000:.0f} ms ({len(times)} rounds)"
            )
    for client in clients.values():
        client.close()


if __name__ == "__main__":
    main()
