"""Loudness targets (EBU R128): segments of very different loudness come out even."""

from __future__ import annotations

import numpy as np
import pytest

from speechgate.audio.loudness import normalize_loudness
from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import SynthesisRequest
from speechgate.pipeline import speak_segments

RATE = 24000


def speechlike(amplitude: float, seconds: float = 1.2, hz: float = 180.0) -> PcmChunk:
    """A voiced buzz with a syllable-rate envelope: loudness measures it as speech."""
    t = np.arange(round(seconds * RATE)) / RATE
    buzz = sum(np.sin(2 * np.pi * hz * k * t) / k for k in range(1, 8))
    syllables = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t)
    audio = buzz * syllables
    return PcmChunk.from_float(amplitude * audio / np.max(np.abs(audio)), RATE)


def lufs(chunk: PcmChunk) -> float:
    import pyloudnorm  # a second's import (scipy): only the processes that run these tests

    return float(pyloudnorm.Meter(RATE).integrated_loudness(chunk.samples / 32768.0))


class Engine:
    """Speaks each sentence at the next amplitude: a quiet one, then a loud one."""

    sample_rate = RATE

    def __init__(self, amplitudes: list[float]) -> None:
        self.amplitudes = amplitudes

    def synthesize(self, request: SynthesisRequest):  # type: ignore[no-untyped-def]
        yield speechlike(self.amplitudes.pop(0))


def segments(chunks: list[PcmChunk]) -> list[PcmChunk]:
    """The spoken segments, without the pauses between them."""
    audio = np.concatenate([chunk.samples for chunk in chunks])
    loud = np.flatnonzero(np.abs(audio) > 0)
    gaps = np.flatnonzero(np.diff(loud) > RATE // 20)
    parts = np.split(loud, gaps + 1)
    return [PcmChunk(audio[part[0] : part[-1] + 1], RATE) for part in parts]


TEXT = "This is said quietly. And this is said far louder than the first."


def test_with_a_target_segments_come_out_within_1_lu_of_each_other() -> None:
    raw = segments(list(speak_segments(Engine([0.15, 0.9]), SynthesisRequest(TEXT, "v"))))
    assert abs(lufs(raw[0]) - lufs(raw[1])) > 15

    even = segments(
        list(speak_segments(Engine([0.15, 0.9]), SynthesisRequest(TEXT, "v"), loudness=-18.0))
    )

    assert len(even) == 2
    assert abs(lufs(even[0]) - lufs(even[1])) < 1.0
    assert lufs(even[1]) == pytest.approx(-18.0, abs=1.0)
    for part in even:
        assert np.max(np.abs(part.samples)) / 32768 <= 10 ** (-1 / 20)


def test_no_target_changes_nothing() -> None:
    first = list(speak_segments(Engine([0.15, 0.9]), SynthesisRequest(TEXT, "v")))
    again = list(speak_segments(Engine([0.15, 0.9]), SynthesisRequest(TEXT, "v"), loudness=None))
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.samples, b.samples)


def test_the_gain_is_bounded_and_peaks_stay_under_minus_1_dbfs() -> None:
    whisper = speechlike(0.001)
    assert lufs(normalize_loudness(whisper, -16.0)) < -30  # no more than the bounded gain
    peaky = speechlike(0.5)
    out = normalize_loudness(peaky, 0.0)
    assert np.max(np.abs(out.samples)) / 32768 <= 10 ** (-1 / 20)
    silent = PcmChunk.silence(1.0, RATE)
    np.testing.assert_array_equal(normalize_loudness(silent, -16.0).samples, silent.samples)
    short = speechlike(0.2, seconds=0.2)
    assert lufs(PcmChunk(np.tile(normalize_loudness(short, -20.0).samples, 3), RATE)) == (
        pytest.approx(-20.0, abs=1.5)
    )
