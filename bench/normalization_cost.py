"""What text normalization costs a request: start-up, time per sentence, and Piper's first
audio with normalization on against off, side by side in one run.

    PYTHONPATH=src python bench/normalization_cost.py [--pairs 30] [--starts 5] [--rounds 20]

1. Start-up: `import speechgate.text.normalize` and `warm` of en, de, fr and es in a fresh
   interpreter (`bench/normalization.py`'s `start_up`), `--starts` times: time and memory added.
2. Per sentence: `normalize` over the hard-text set (tests/text/hard_text.yaml), p50 and p99 per
   language, `--rounds` rounds.
3. First audio of short sentences, Piper (en_US-joe-medium), normalization on and off in turns
   (the order flips every pair, so load that comes and goes falls on both alike):
   - in-process: `speechgate.pipeline.render` to WAV, the `elapsed` of its first chunk of audio;
   - a real server (`speechgate serve`, Piper, loopback): `POST /v1/audio/speech` with
     `apply_text_normalization` `on`/`off`, the server's `x-speechgate-time-to-first-audio-ms`
     and the client's time to the first byte of audio.
   Printed per sentence: the median of each side with its 10th-90th percentiles, and the median
   of the paired differences (on minus off).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import httpx
import numpy as np
from loopback_server import speechgate_serve
from normalization import per_sentence, start_up

from speechgate.audio.formats import AudioFormat
from speechgate.engines import load_engine
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.pipeline import OutputSpec, render
from speechgate.text.prepare import TextOptions

_VOICE = "en_US-joe-medium"
SHORT = [
    "It costs $5.20 today.",
    "Meet me at 8:00 a.m. on Dec. 2nd.",
    "It is 20% off until 2026-12-02.",
    "Call (555) 123-4567 now.",
    "Hello there, how are you?",
]


def spread(values: list[float]) -> str:
    low, mid, high = np.percentile(values, [10, 50, 90])
    return f"{mid:6.1f} ({low:.1f}-{high:.1f})"


def in_process_first_audio(text: str, normalize: bool, engine: Any) -> float:
    options = TextOptions(normalize=normalize, language="en-US", phonemes=True, engine="piper")
    request = SynthesisRequest(text, _VOICE, text_options=options)
    chunks = render(engine, request, OutputSpec(AudioFormat.WAV, engine.sample_rate))
    try:
        for chunk in chunks:
            if chunk.audio_seconds > 0:
                return chunk.elapsed * 1000
    finally:
        chunks.close()
    raise RuntimeError(f"no audio for {text!r}")


def server_first_audio(client: httpx.Client, text: str, normalize: bool) -> tuple[float, float]:
    """(the server's time to first audio, the client's time to the first byte of audio), ms.
    The first bytes of a WAV stream are its 44-byte header: audio is what comes after."""
    body = {
        "model": "piper",
        "voice": _VOICE,
        "input": text,
        "response_format": "wav",
        "apply_text_normalization": "on" if normalize else "off",
    }
    started = time.perf_counter()
    with client.stream("POST", "/v1/audio/speech", json=body) as answer:
        answer.raise_for_status()
        received = 0
        first_byte = None
        for data in answer.iter_bytes():
            received += len(data)
            if received > 44:
                first_byte = (time.perf_counter() - started) * 1000
                break
        server = float(answer.headers["x-speechgate-time-to-first-audio-ms"])
    if first_byte is None:
        raise RuntimeError(f"no audio for {text!r}")
    return server, first_byte


def compare(name: str, measure: Any, pairs: int) -> None:
    """`measure(text, normalize)` gives {figure: ms}; a table per figure."""
    figures: dict[str, dict[tuple[str, bool], list[float]]] = {}
    for text in SHORT:
        measure(text, True)  # once each, unmeasured: the first of a text pays for caches
        measure(text, False)
        for index in range(pairs):
            for normalize in (True, False) if index % 2 == 0 else (False, True):
                for figure, value in measure(text, normalize).items():
                    figures.setdefault(figure, {}).setdefault((text, normalize), []).append(value)
    for figure, values in figures.items():
        print(f"\n{name}, {figure}: ms, median (p10-p90) over {pairs} pairs")
        print(f"{'sentence':36} {'on':>20} {'off':>20} {'on-off (median)':>16}")
        for text in SHORT:
            on, off = values[(text, True)], values[(text, False)]
            paired = statistics.median(a - b for a, b in zip(on, off, strict=True))
            print(f"{text:36} {spread(on):>20} {spread(off):>20} {paired:>+16.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=30, help="on/off pairs per sentence")
    parser.add_argument("--starts", type=int, default=5, help="fresh interpreters for start-up")
    parser.add_argument("--rounds", type=int, default=20, help="rounds over the hard-text set")
    parser.add_argument("--no-server", action="store_true", help="in-process only")
    args = parser.parse_args(argv)

    starts = [start_up() for _ in range(args.starts)]
    print(f"start-up over {args.starts} fresh interpreters, median (min-max):")
    for key in ("import_ms", "warm_en_ms", "warm_de_fr_es_ms", "rss_added_mb"):
        values = [start[key] for start in starts]
        print(f"  {key:18} {statistics.median(values):7.1f} ({min(values):.1f}-{max(values):.1f})")
    print(f"\nper sentence, {args.rounds} rounds over the hard-text set:")
    print(f"{'language':10} {'sentences':>9} {'p50 µs':>8} {'p99 µs':>8}")
    for language, row in per_sentence(args.rounds).items():
        print(f"{language:10} {row['sentences']:>9} {row['p50_us']:>8.0f} {row['p99_us']:>8.0f}")

    engine = load_engine(EngineConfig("piper", threads=1))
    try:
        compare(
            "in-process (render)",
            lambda text, on: {"first chunk": in_process_first_audio(text, on, engine)},
            args.pairs,
        )
    finally:
        engine.close()
    if not args.no_server:
        env = {"SPEECHGATE_ENGINES": "piper", "SPEECHGATE_DEFAULT_ENGINE": "piper"}
        with speechgate_serve(env) as url, httpx.Client(base_url=url, timeout=60) as client:

            def measure(text: str, on: bool) -> dict[str, float]:
                server, first_byte = server_first_audio(client, text, on)
                return {"server's time to first audio": server, "client's first byte": first_byte}

            compare("server", measure, args.pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
