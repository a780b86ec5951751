"""The espeak-ng engine, on the real library (it starts in ~5 ms and speaks ~1000x real time)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("espeakng_loader")

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.engines.espeak.engine import EspeakEngine

pytestmark = pytest.mark.slow

SENTENCE = "The quick brown fox jumps over the lazy dog."
THREE_SENTENCES = "The sun is up. Birds are singing in the trees! Is it time for breakfast?"


@pytest.fixture
def engine() -> Iterator[EspeakEngine]:
    engine = EspeakEngine()
    yield engine
    engine.close()


def speak(
    engine: EspeakEngine, text: str, voice: str = "en-us", speed: float = 1.0
) -> list[PcmChunk]:
    return list(engine.synthesize(SynthesisRequest(text=text, voice=voice, speed=speed)))


def joined(chunks: list[PcmChunk]) -> np.ndarray[Any, np.dtype[np.int16]]:
    return np.concatenate([chunk.samples for chunk in chunks])


def median_pitch(samples: np.ndarray[Any, np.dtype[np.int16]], rate: int) -> float:
    """Median F0 over voiced 40 ms frames, by autocorrelation in 60..400 Hz."""
    audio = samples.astype(np.float64)
    frame = int(0.04 * rate)
    loud = 0.3 * np.sqrt(np.mean(audio**2))
    pitches = []
    for start in range(0, len(audio) - frame, frame):
        window = audio[start : start + frame] - audio[start : start + frame].mean()
        if np.sqrt(np.mean(window**2)) < loud:
            continue
        correlation = np.correlate(window, window, "full")[frame - 1 :]
        low, high = rate // 400, rate // 60
        lag = low + int(np.argmax(correlation[low:high]))
        if correlation[lag] > 0.3 * correlation[0]:
            pitches.append(rate / lag)
    return float(np.median(pitches))


def test_voices_are_language_codes(engine: EspeakEngine) -> None:
    voices = {voice.id: voice for voice in engine.voices()}
    assert voices["en-us"].name == "English (America)"
    assert voices["en-us"].language == "en-us"
    assert {"en", "en-gb", "fr", "de"} <= voices.keys()
    assert {"f3", "m3"} <= engine.variants


def test_each_sentence_is_its_own_chunk(engine: EspeakEngine) -> None:
    assert len(speak(engine, THREE_SENTENCES)) == 3


# Double speed is in test_contract.py; below 80 wpm espeak-ng needs a stretch too.
@pytest.mark.parametrize(("speed", "ratio"), [(0.5, 2.0)])
def test_speed_scales_duration(engine: EspeakEngine, speed: float, ratio: float) -> None:
    normal = len(joined(speak(engine, THREE_SENTENCES)))
    changed = len(joined(speak(engine, THREE_SENTENCES, speed=speed)))
    assert changed / normal == pytest.approx(ratio, rel=0.15)


def test_variant_changes_the_voice(engine: EspeakEngine) -> None:
    # espeak-ng adds random jitter, so outputs never match exactly: compare pitch instead.
    plain = median_pitch(joined(speak(engine, SENTENCE)), engine.sample_rate)
    female = median_pitch(joined(speak(engine, SENTENCE, voice="en-us+f3")), engine.sample_rate)
    assert female > 1.5 * plain


def test_interleaved_requests_keep_their_own_voice(engine: EspeakEngine) -> None:
    plain = engine.synthesize(SynthesisRequest(text=THREE_SENTENCES, voice="en-us"))
    female = engine.synthesize(SynthesisRequest(text=THREE_SENTENCES, voice="en-us+f3"))
    pitches = []
    for plain_chunk, female_chunk in zip(plain, female, strict=True):
        pitches.append(
            (
                median_pitch(plain_chunk.samples, engine.sample_rate),
                median_pitch(female_chunk.samples, engine.sample_rate),
            )
        )
    assert all(high > 1.5 * low for low, high in pitches)


class _CountingLibrary:
    """Forwards to the real library, counting espeak_Synth calls."""

    def __init__(self, library: Any) -> None:
        self._library = library
        self.synth_calls = 0

    def __getattr__(self, name: str) -> Any:
        if name == "espeak_Synth":
            self.synth_calls += 1
        return getattr(self._library, name)


def test_stopping_early_stops_synthesis(
    engine: EspeakEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    library = _CountingLibrary(engine._lib)
    monkeypatch.setattr(engine, "_lib", library)
    chunks = engine.synthesize(SynthesisRequest(text=THREE_SENTENCES, voice="en-us"))
    next(chunks)
    chunks.close()
    assert library.synth_calls == 1
    assert len(speak(engine, THREE_SENTENCES)) == 3


def test_one_engine_per_process(engine: EspeakEngine) -> None:
    with pytest.raises(RuntimeError, match="already open"):
        EspeakEngine()


def test_a_closed_engine_refuses_work_and_frees_the_process() -> None:
    first = EspeakEngine()
    first.close()
    first.close()
    with pytest.raises(RuntimeError, match="closed"):
        speak(first, SENTENCE)
    second = EspeakEngine()
    try:
        assert speak(second, SENTENCE)
    finally:
        second.close()


def test_from_config() -> None:
    with pytest.raises(ValueError, match="no options"):
        EspeakEngine.from_config(EngineConfig(name="espeak", options={"model": "x"}))
    engine = EspeakEngine.from_config(EngineConfig(name="espeak", threads=4))
    engine.close()
