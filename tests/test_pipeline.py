"""Rendering: engine PCM to encoded chunks, timed where the engine runs."""

from __future__ import annotations

import time

from speechgate.audio.formats import AudioFormat
from speechgate.engines import SynthesisRequest, load_engine
from speechgate.engines.base import EngineConfig
from speechgate.pipeline import OutputSpec, render


def test_chunks_carry_the_time_since_rendering_began() -> None:
    engine = load_engine(EngineConfig("espeak"))
    try:
        voice = engine.voices()[0].id
        started = time.perf_counter()
        chunks = list(
            render(
                engine,
                SynthesisRequest("First sentence here. And a second one.", voice),
                OutputSpec(AudioFormat.PCM, 24000),
            )
        )
        total = time.perf_counter() - started
    finally:
        engine.close()
    elapsed = [chunk.elapsed for chunk in chunks]
    assert len(chunks) > 2
    assert elapsed == sorted(elapsed)
    assert 0 < elapsed[0] < elapsed[-1] <= total
