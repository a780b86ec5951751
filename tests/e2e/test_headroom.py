"""Piper's speech keeps headroom: no full-scale peaks, and lossy codecs decode without clipping."""

from __future__ import annotations

import numpy as np
import openai
import pytest

from tests.helpers.audio import decode_audio

pytestmark = pytest.mark.slow

TEXT = (
    "WOW, that is absolutely AMAZING! Hello, how are you doing today? "
    "Peter Piper picked a peck of pickled peppers. The train to Boston departs at nine."
)
HEADROOM_DBFS = -1.0


def peak_dbfs(samples: np.ndarray) -> float:
    return float(20 * np.log10(np.max(np.abs(samples))))


@pytest.mark.parametrize("fmt", ["pcm", "wav", "flac"])
def test_piper_peaks_stay_below_full_scale(client: openai.OpenAI, fmt: str) -> None:
    body = client.audio.speech.create(model="piper", voice="alloy", input=TEXT, response_format=fmt)
    audio = decode_audio(body.content, fmt)
    assert HEADROOM_DBFS - 3 < peak_dbfs(audio.samples) <= HEADROOM_DBFS


@pytest.mark.parametrize("fmt", ["opus", "mp3", "aac"])
def test_piper_in_a_lossy_codec_decodes_without_clipping(client: openai.OpenAI, fmt: str) -> None:
    body = client.audio.speech.create(model="piper", voice="alloy", input=TEXT, response_format=fmt)
    audio = decode_audio(body.content, fmt)
    # A codec's overshoot of the peaks must stay inside the headroom: nothing reaches or
    # passes full scale, where a fixed-point decoder would clip.
    assert np.max(np.abs(audio.samples)) < 1.0
