"""Loudness normalization toward an EBU R128 target (ITU-R BS.1770 integrated loudness).

Uses the optional `pyloudnorm`, imported only by a server with a loudness target.
"""

from __future__ import annotations

import math

import numpy as np

from speechgate.audio.pcm import PcmChunk

# The most a segment is raised or lowered: a near-silent segment (a breath, a lone "Hm.") is
# not blown up to full loudness, nor a shout crushed.
MAX_GAIN_DB = 12.0
# Sample peaks stay below this after the gain: lossy codecs overshoot peaks on decoding.
PEAK_CEILING_DBFS = -1.0
# BS.1770 gates 400 ms blocks; a shorter segment is measured repeated to fill one (silence as
# padding would read it quieter than it is).
_BLOCK_SECONDS = 0.4


def normalize_loudness(chunk: PcmChunk, target_lufs: float) -> PcmChunk:
    """`chunk` with one gain toward `target_lufs`: bounded by MAX_GAIN_DB, lowered further if
    the peaks would pass PEAK_CEILING_DBFS. Silence comes back unchanged."""
    import pyloudnorm

    audio = chunk.samples.astype(np.float64) / 32768.0
    measured = audio
    block = math.ceil(_BLOCK_SECONDS * chunk.sample_rate)
    if len(audio) < block:
        measured = np.resize(audio, block)
    with np.errstate(divide="ignore"):
        loudness = float(pyloudnorm.Meter(chunk.sample_rate).integrated_loudness(measured))
    peak = float(np.max(np.abs(audio))) if len(audio) else 0.0
    if not math.isfinite(loudness) or peak == 0.0:
        return chunk
    gain_db = min(max(target_lufs - loudness, -MAX_GAIN_DB), MAX_GAIN_DB)
    gain = min(10 ** (gain_db / 20), 10 ** (PEAK_CEILING_DBFS / 20) / peak)
    return PcmChunk.from_float(audio * gain, chunk.sample_rate)
