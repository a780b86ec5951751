"""A lone job's later segments side by side (`speechgate.lanes`) against one after the other.

    PYTHONPATH=src .venv/bin/python bench/lanes.py                    # Piper, ~1 min on 2 cores
    PYTHONPATH=src .venv/bin/python bench/lanes.py --engine kokoro --rounds 2

In this process, one engine with every usable core (as a server's lone job has), speaks the
long text set (`speechgate.bench.LONG_TEXTS`, eight sentences a paragraph) through
`pipeline.render`, as WAV at 24 kHz: once with `Lanes` open (the first sentence on every core,
then pairs a thread each), once without (every sentence on every core, as before), taking
turns round by round, since this machine's speed drifts by a tenth within minutes. Prints each
round's audio seconds per second and the ratio of the totals. Pairs form only where the engine
has exactly two cores (two 1-core workers' worth); on more, both ways are the same.
"""

from __future__ import annotations

import argparse
import os
import time

from speechgate.audio.formats import AudioFormat
from speechgate.bench import LONG_TEXTS
from speechgate.engines import load_engine
from speechgate.engines.base import Elastic, EngineConfig, SynthesisRequest
from speechgate.lanes import Lanes
from speechgate.pipeline import OutputSpec, render


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", default="piper", choices=["piper", "kokoro"])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    engine = load_engine(EngineConfig(args.engine, threads=1, max_threads=cores))
    assert isinstance(engine, Elastic)
    voice = engine.voices()[0].id
    output = OutputSpec(AudioFormat.WAV, 24000)
    lanes = Lanes(engine, (1, cores))
    lanes.set_width(cores)

    def speak(with_lanes: bool) -> tuple[float, float]:
        engine.use_threads(cores)
        started = time.perf_counter()
        audio = 0.0
        for text in LONG_TEXTS:
            request = SynthesisRequest(text.text, voice)
            audio += sum(
                c.audio_seconds
                for c in render(engine, request, output, lanes=lanes if with_lanes else None)
            )
        return audio, time.perf_counter() - started

    speak(True)  # warm-up: both widths' sessions, the helper thread
    totals = {True: [0.0, 0.0], False: [0.0, 0.0]}
    for round_ in range(args.rounds):
        line = []
        # Alternate which goes first, so a drift within the round favours neither.
        for with_lanes in (True, False) if round_ % 2 == 0 else (False, True):
            audio, wall = speak(with_lanes)
            totals[with_lanes][0] += audio
            totals[with_lanes][1] += wall
            line.append(f"{'pairs' if with_lanes else 'one by one'} {audio / wall:.2f}x")
        print(f"round {round_ + 1}: " + ", ".join(line), flush=True)
    paired = totals[True][0] / totals[True][1]
    single = totals[False][0] / totals[False][1]
    print(
        f"{args.engine}, {cores} cores: pairs {paired:.2f}x, one by one {single:.2f}x real time, "
        f"ratio {paired / single:.2f} ({lanes.pairs} pairs)"
    )
    lanes.close()
    engine.close()


if __name__ == "__main__":
    main()
