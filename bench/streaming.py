"""Streaming benchmarks: long-input time to first audio, and the LLM path's latency.

    PYTHONPATH=. .venv/bin/python bench/streaming.py [--pairs 10] [--runs 5] [--engine piper]

(PYTHONPATH=. for the test helpers it reuses: the loopback server and the fake upstream.)

Starts its own server (and a fake OpenAI-compatible upstream that streams tokens at a steady
rate, like an LLM), then prints:

1. Time to first audio of a ~4,000-character text against that of its first sentence alone,
   measured in alternating pairs (drift cancels out); the ratio of the medians.
2. For an answer streamed token by token through `/v1/chat/completions` into a speech
   session: the delay from the arrival of the token that completes sentence 1 to its first
   audio (median over runs), and the first audio after asking.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import time

import httpx
from tests.helpers.server import running_server
from tests.helpers.upstream import FakeUpstream, running_upstream

from speechgate.settings import Settings
from speechgate.spoken_chat import speak_answer
from speechgate.text.segment import segment

FIRST = "The committee met on Tuesday to review the plan."
BODY = " ".join(
    f"Section {n} explains the budget, the schedule and the risks in plain words for everyone."
    for n in range(45)
)
LONG = f"{FIRST} {BODY}"[:4000].rsplit(". ", 1)[0] + "."
ANSWER = (
    "Sure, here is the short version. The plan starts in March and ends in June. "
    "It costs less than last year."
)


def ttfa(client: httpx.Client, url: str, text: str, engine: str) -> float:
    body = {"model": engine, "voice": "alloy", "input": text, "response_format": "mp3"}
    sent = time.monotonic()
    with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for _ in response.iter_bytes():
            return time.monotonic() - sent  # leaving cancels the rest of the job
    raise RuntimeError("no audio")


def wait_idle(client: httpx.Client, url: str, engine: str) -> None:
    """Until the abandoned long job has stopped: its worker finishes the segment under way."""
    while client.get(f"{url}/readyz").json()["engines"][engine]["workers"] != {"idle": 1}:
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--engine", default="piper")
    parser.add_argument("--token-delay", type=float, default=0.03, help="seconds per token")
    args = parser.parse_args()

    tokens = [word if i == 0 else f" {word}" for i, word in enumerate(ANSWER.split(" "))]
    upstream_spec = FakeUpstream(tokens=tokens, delay=args.token_delay)
    with running_upstream(upstream_spec) as upstream:
        settings = Settings.model_validate(
            {
                "engines": [args.engine],
                "default_engine": args.engine,
                "pool": {"workers": 1},
                "llm": {"base_url": upstream.url},
            }
        )
        with running_server(settings) as server, httpx.Client(timeout=120) as client:
            assert segment(LONG)[0] == FIRST and len(LONG) > 3900
            ttfa(client, server.url, FIRST, args.engine)  # warm-up
            long, short = [], []
            for _ in range(args.pairs):
                long.append(ttfa(client, server.url, LONG, args.engine))
                wait_idle(client, server.url, args.engine)
                short.append(ttfa(client, server.url, FIRST, args.engine))
            ratio = statistics.median(long) / statistics.median(short)
            print(
                f"TTFA, {len(LONG)}-char text: p50 {statistics.median(long) * 1000:.0f} ms; "
                f"its first sentence alone: p50 {statistics.median(short) * 1000:.0f} ms; "
                f"ratio {ratio:.2f} ({args.pairs} pairs, {args.engine})"
            )

            delays, firsts = [], []
            for _ in range(args.runs):
                answer = asyncio.run(
                    speak_answer(
                        server.url,
                        [{"role": "user", "content": "Summarise the plan."}],
                        "fake",
                        {"model": args.engine, "voice": "alloy", "response_format": "mp3"},
                        io.BytesIO(),
                    )
                )
                delay = answer.first_sentence_delay()
                assert delay is not None and answer.first_audio is not None
                delays.append(delay)
                firsts.append(answer.first_audio)
            print(
                f"LLM path ({args.token_delay * 1000:.0f} ms per token, {args.runs} runs): "
                f"first sentence complete -> its first audio p50 "
                f"{statistics.median(delays) * 1000:.0f} ms (min {min(delays) * 1000:.0f}, "
                f"max {max(delays) * 1000:.0f}); first audio after asking p50 "
                f"{statistics.median(firsts) * 1000:.0f} ms"
            )


if __name__ == "__main__":
    main()
