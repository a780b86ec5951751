"""Whole speech bodies decoded back to PCM, in every format speechgate sends."""

from __future__ import annotations

import numpy as np
import pytest

from speechgate.audio.clip import UndecodableAudio
from speechgate.audio.decode import decode_speech
from speechgate.audio.encoders import StreamEncoder
from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk

RATE = 24000


def tone(seconds: float) -> PcmChunk:
    t = np.arange(round(seconds * RATE)) / RATE
    return PcmChunk((8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16), RATE)


@pytest.mark.parametrize(
    ("fmt", "rate"),
    [(f, 24000) for f in ("mp3", "opus", "aac", "flac", "wav", "pcm")]
    + [("ulaw", 8000), ("alaw", 8000)],
)
def test_a_body_decodes_to_as_much_audio_as_was_encoded(fmt: str, rate: int) -> None:
    encoder = StreamEncoder(fmt, RATE, rate if fmt != "opus" else 48000)
    body = encoder.encode(tone(1.0)) + encoder.finish()
    encoder.close()
    pcm = decode_speech(body, AudioFormat(fmt), rate)
    assert pcm.sample_rate == encoder.output_rate
    # The second of tone, give or take a codec's priming and last frame (AAC: 2 x 1024).
    assert pcm.duration == pytest.approx(1.0, abs=0.1)
    assert np.abs(pcm.samples.astype(np.int32)).max() > 4000


def test_what_is_not_audio_is_refused() -> None:
    with pytest.raises(UndecodableAudio):
        decode_speech(b"<html>not audio</html>", AudioFormat.MP3, RATE)
