"""Streaming sample-rate conversion of PCM chunks."""

from __future__ import annotations

import numpy as np
import pytest

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.resample import resample


def tone(seconds: float, rate: int, hz: float = 440.0) -> PcmChunk:
    t = np.arange(round(seconds * rate)) / rate
    return PcmChunk.from_float(0.5 * np.sin(2 * np.pi * hz * t), rate)


def test_chunks_at_the_target_rate_pass_through_untouched() -> None:
    chunk = tone(0.1, 22050)
    assert [out is chunk for out in resample([chunk], 22050)] == [True]


def test_a_16_khz_stream_keeps_its_duration_and_pitch_at_22050() -> None:
    chunks = [tone(0.5, 16000), PcmChunk(np.zeros(0, np.int16), 16000), tone(0.5, 16000)]
    out = list(resample(chunks, 22050))
    assert {chunk.sample_rate for chunk in out} == {22050}
    samples = np.concatenate([chunk.samples for chunk in out])
    assert len(samples) / 22050 == pytest.approx(1.0, abs=0.002)
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64)))
    assert np.fft.rfftfreq(len(samples), 1 / 22050)[spectrum.argmax()] == pytest.approx(440, abs=2)
