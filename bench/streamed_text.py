"""A streamed LLM-style answer against its first sentence sent whole, side by side in one run.

    PYTHONPATH=.:src .venv/bin/python bench/streamed_text.py [--engines espeak,piper]
        [--rounds 5] [--token-delay 0.03] [--json PATH]

(PYTHONPATH=. for bench/loopback_server.py, run from the repository root.)

For each engine, starts `speechgate serve` (that engine alone, one worker, no phrase cache, no
usage metering, no real-time hold on a session's audio), then:

1. Segments: each answer is written to a WebSocket session (`/v1/audio/speech/stream`) in
   tokens of 1 to 4 characters, 30 ms apart, and read to its end; then written whole (one
   delta) to two more sessions. Prints whether the segments (`segment.started`) are the same,
   the audio's length and whether the PCM is: neither engine makes the same samples twice
   (Piper samples noise, espeak-ng varies too), so the whole text said again is the yardstick.
2. First audio, round after round, each answer in turn (the order of the two alternating by
   round, so drift on a shared machine falls on both alike):
   - streamed: the answer written in tokens as above (a split drawn anew each round); the
     time of its first audio (first binary frame) after the first token was sent, after the
     token holding the first sentence's period ("period"), and after the token holding the
     first character that shows the sentence ended ("confirmed": the next word's, which a
     segmenter that splits the text as the whole text would be split must wait for); and that
     confirmation's wait after the period. The session is closed at its first audio.
   - alone: the first segment (as the session spoke it) through `POST /v1/audio/speech`, pcm,
     the time to its first byte of audio.

Prints p50s per engine and answer, and the p50 of the per-round ratios streamed/alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from loopback_server import speechgate_serve
from websockets.asyncio.client import ClientConnection, connect

# Multi-sentence answers with false periods ("approx. five", "example.com", "Dr. Smith",
# "3.14", "U.S.") in the first sentence or right after it, and sentences ending in a number.
ANSWERS = {
    "approx": "The fee is approx. five dollars a month. See example.com for the terms.",
    "pi": "The answer is 3.14 in most cases. The U.S. team agreed on it.",
    "domain": "Visit example.com to sign up today. It takes two minutes.",
    "number": "Our team scored 42. Then the rain came and the game stopped.",
    "doctor": "Dr. Smith will see you at ten tomorrow. Please bring your card.",
    "us": "The U.S. office opens at nine in the morning. Call us at 7. Dr. Lee answers.",
}
RATE = 24000  # of `pcm`


@dataclass
class Streamed:
    segments: list[str]
    audio: bytes
    first_audio: float  # after the first token was sent
    period: float  # first audio after the token holding the first segment's last character
    confirmed: float  # first audio after the token that shows the segment ended
    wait: float  # confirmed's token after period's


def tokens(text: str, rng: random.Random) -> list[str]:
    pieces, at = [], 0
    while at < len(text):
        size = rng.randint(1, 4)
        pieces.append(text[at : at + size])
        at += size
    return pieces


def token_at(pieces: list[str], position: int) -> int:
    """The index of the piece holding character `position` of their concatenation."""
    end = 0
    for index, piece in enumerate(pieces):
        end += len(piece)
        if position < end:
            return index
    return len(pieces)  # past the text: the end of the text (`input_text.done`) shows it


async def stream(url: str, engine: str, pieces: list[str], delay: float, whole: bool) -> Streamed:
    """Write `pieces` `delay` apart to a session; with `whole`, read it to its end, else close
    it at its first audio."""
    ws_url = url.replace("http", "ws", 1) + "/v1/audio/speech/stream"
    options = {"model": engine, "voice": "alloy", "response_format": "pcm"}
    async with connect(ws_url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "session.update", "session": options}))
        created = json.loads(await ws.recv())
        assert created["type"] == "session.created", created
        sent: list[float] = []
        writer = asyncio.create_task(_write(ws, pieces, delay, sent))
        segments: list[str] = []
        audio = bytearray()
        first: float | None = None
        try:
            async for message in ws:
                if isinstance(message, bytes):
                    if first is None:
                        first = time.perf_counter()
                    audio += message
                    if not whole:
                        break
                    continue
                event = json.loads(message)
                if event["type"] == "segment.started":
                    segments.append(event["text"])
                elif event["type"] == "session.done":
                    break
                elif event["type"] == "error":
                    raise RuntimeError(event)
        finally:
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
    assert first is not None and segments
    text = "".join(pieces)
    end = text.index(segments[0]) + len(segments[0])
    following = len(text) - len(text[end:].lstrip())
    period = sent[token_at(pieces, end - 1)]
    # The text's end (`input_text.done`) confirms a last sentence: sent right after its token.
    confirmed = sent[min(token_at(pieces, following), len(sent) - 1)]
    return Streamed(
        segments,
        bytes(audio),
        first - sent[0],
        first - period,
        first - confirmed,
        confirmed - period,
    )


async def _write(ws: ClientConnection, pieces: list[str], delay: float, sent: list[float]) -> None:
    start = time.perf_counter()
    for index, piece in enumerate(pieces):
        await asyncio.sleep(max(0.0, start + index * delay - time.perf_counter()))
        sent.append(time.perf_counter())
        await ws.send(json.dumps({"type": "input_text.delta", "delta": piece}))
    sent.append(time.perf_counter())
    await ws.send(json.dumps({"type": "input_text.done"}))


async def alone(client: httpx.AsyncClient, url: str, engine: str, text: str) -> float:
    """Seconds to the first byte of audio of `text` asked whole; the rest is not read."""
    body = {"model": engine, "voice": "alloy", "input": text, "response_format": "pcm"}
    started = time.perf_counter()
    async with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        async for data in response.aiter_bytes():
            if data:
                return time.perf_counter() - started
    raise RuntimeError("no audio")


async def wait_idle(client: httpx.AsyncClient, url: str, engine: str) -> None:
    """Until a closed session's job has stopped, so the next request finds the worker free."""
    while True:
        ready = (await client.get(f"{url}/readyz")).json()
        if set(ready["engines"][engine]["workers"]) == {"idle"}:
            return
        await asyncio.sleep(0.01)


def p50(values: list[float]) -> float:
    return statistics.median(values)


async def bench_engine(
    url: str, engine: str, rounds: int, delay: float
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    async with httpx.AsyncClient(timeout=120) as client:
        firsts: dict[str, str] = {}
        checks: dict[str, Any] = {}
        for name, text in ANSWERS.items():
            streamed = await stream(url, engine, tokens(text, random.Random(name)), delay, True)
            at_once = await stream(url, engine, [text], delay, True)
            again = await stream(url, engine, [text], delay, True)  # what a repeat changes
            firsts[name] = streamed.segments[0]
            checks[name] = {
                "segments": streamed.segments,
                "same_segments": streamed.segments == at_once.segments == again.segments,
                "seconds": [len(run.audio) / 2 / RATE for run in (streamed, at_once, again)],
                "same_pcm": streamed.audio == at_once.audio,
                "repeat_same_pcm": again.audio == at_once.audio,
            }
            await alone(client, url, engine, firsts[name])  # warm-up
        runs: list[dict[str, Any]] = []
        for round_ in range(rounds):
            for name, text in ANSWERS.items():
                pieces = tokens(text, random.Random(f"{name}{round_}"))
                order = ("streamed", "alone") if round_ % 2 == 0 else ("alone", "streamed")
                row: dict[str, Any] = {"answer": name, "round": round_}
                for side in order:
                    await wait_idle(client, url, engine)
                    if side == "alone":
                        row["alone"] = await alone(client, url, engine, firsts[name])
                    else:
                        streamed = await stream(url, engine, pieces, delay, False)
                        assert streamed.segments[0] == firsts[name], streamed.segments
                        row.update(asdict(streamed))
                        del row["segments"], row["audio"]
                runs.append(row)
        return checks, runs


def report(engine: str, checks: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    print(f"\n{engine}: segments streamed in 1-4 character tokens against the whole text")
    print("  (seconds of audio: streamed / whole / whole again; the same PCM: streamed and whole,")
    print("  whole and whole again)")
    for name, check in checks.items():
        seconds = " / ".join(f"{value:.3f}" for value in check["seconds"])
        print(
            f"  {name:7} same segments {check['same_segments']}; {seconds} s; same PCM "
            f"{check['same_pcm']}, {check['repeat_same_pcm']}: {check['segments']}"
        )
    print(
        f"{engine}: first audio p50 (ms), and p50 of the per-round ratios to the first segment "
        "alone"
    )
    print(
        "  answer   from 1st token  from period  from confirmed  confirm wait  alone"
        "  period/alone  confirmed/alone"
    )
    for name in [*ANSWERS, "all"]:
        rows = [row for row in runs if name in ("all", row["answer"])]

        def ms(key: str, rows: list[dict[str, Any]] = rows) -> str:
            return f"{p50([row[key] for row in rows]) * 1000:.0f}"

        def ratio(key: str, rows: list[dict[str, Any]] = rows) -> str:
            return f"{p50([row[key] / row['alone'] for row in rows]):.2f}"

        print(
            f"  {name:7} {ms('first_audio'):>15} {ms('period'):>12} {ms('confirmed'):>15}"
            f" {ms('wait'):>13} {ms('alone'):>6} {ratio('period'):>13}"
            f" {ratio('confirmed'):>16}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default="espeak,piper")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--token-delay", type=float, default=0.03, help="seconds per token")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for engine in args.engines.split(","):
        with (
            tempfile.TemporaryDirectory() as data,
            speechgate_serve(
                {
                    "SPEECHGATE_ENGINES": engine,
                    "SPEECHGATE_DEFAULT_ENGINE": engine,
                    "SPEECHGATE_POOL__WORKERS": "1",
                    "SPEECHGATE_DATA_DIR": data,
                    "SPEECHGATE_USAGE__METERING": "false",
                    # The alone side says each first sentence again every round.
                    "SPEECHGATE_PHRASE_CACHE__MAX_BYTES": "0",
                    # A session read to its end is read as fast as it is made.
                    "SPEECHGATE_SESSIONS__MAX_LEAD_SECONDS": "3600",
                }
            ) as url,
        ):
            checks, runs = asyncio.run(bench_engine(url, engine, args.rounds, args.token_delay))
        report(engine, checks, runs)
        results[engine] = {"checks": checks, "runs": runs}
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
