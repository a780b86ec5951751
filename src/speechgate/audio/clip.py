"""Voice prompts from uploaded audio: decode any common format, check that it holds speech.

Decoding stops at `max_seconds`, as a few KiB of FLAC can hold hours of constant samples, and
rates outside 8-384 kHz are refused before decoding, as a tiny rate turns each input sample into
thousands. Speech is 20 ms frames louder than -40 dBFS, no voice-activity model needed; loud
frames whose levels barely spread (a tone, a buzz, DC, white noise) are `steady`, not speech,
which rises and falls with every syllable.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import BinaryIO

import av
import numpy as np

from speechgate.audio.pcm import PcmChunk

_FRAME_SECONDS = 0.02
# Quiet speech is around -30 dBFS, a silent room's noise floor below -60.
_SPEECH_RMS = 10 ** (-40 / 20)
MIN_SAMPLE_RATE = 8000
MAX_SAMPLE_RATE = 384000
STEADY_SPREAD_DB = 6.0
"""Loud frames whose levels (10th to 90th percentile) spread less than this are not speech."""


class UndecodableAudio(ValueError):
    """The bytes are not decodable audio, or are sampled at a rate no voice is recorded at."""


@dataclass(frozen=True)
class Clip:
    pcm: PcmChunk
    speech_seconds: float
    level_spread: float
    """dB between the 10th and the 90th percentile of its loud frames' levels (0 if none)."""

    @property
    def steady(self) -> bool:
        return self.level_spread < STEADY_SPREAD_DB


def decode_clip(data: bytes | BinaryIO, sample_rate: int, max_seconds: float) -> Clip:
    """Decode the first `max_seconds` of `data` to mono 16-bit PCM at `sample_rate`. Raises
    UndecodableAudio."""
    limit = round(max_seconds * sample_rate)
    parts: list[np.ndarray] = []
    kept = 0
    source = io.BytesIO(data) if isinstance(data, bytes) else data
    try:
        with av.open(source, mode="r") as container:
            if not container.streams.audio:
                raise UndecodableAudio("the file has no audio stream")
            stream = container.streams.audio[0]
            _check_rate(stream.sample_rate)
            resampler = av.AudioResampler(format="s16", layout="mono", rate=sample_rate)
            for frame in container.decode(stream):
                # A stream may change its rate midway (chained Ogg, a crafted FLAC frame).
                _check_rate(frame.sample_rate)
                for out in resampler.resample(frame):
                    parts.append(out.to_ndarray().reshape(-1))
                    kept += out.samples
                if kept >= limit:
                    break
            else:
                parts += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
    except av.FFmpegError as error:
        raise UndecodableAudio(str(error)) from None
    samples = np.concatenate(parts)[:limit] if parts else np.zeros(0, np.int16)
    pcm = PcmChunk(samples.astype(np.int16, copy=False), sample_rate)
    return Clip(pcm, speech_seconds(pcm), level_spread(pcm))


def _check_rate(rate: int | None) -> None:
    # 0 or None: not known from the header; every decoded frame is checked again.
    if rate and not MIN_SAMPLE_RATE <= rate <= MAX_SAMPLE_RATE:
        raise UndecodableAudio(
            f"its sample rate, {rate} Hz, is outside {MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz"
        )


def speech_seconds(pcm: PcmChunk) -> float:
    frame, levels = _frame_levels(pcm)
    return float(np.count_nonzero(levels > _SPEECH_RMS)) * frame / pcm.sample_rate


def level_spread(pcm: PcmChunk) -> float:
    """dB between the 10th and 90th percentile levels of `pcm`'s loud 20 ms frames."""
    _, levels = _frame_levels(pcm)
    loud = levels[levels > _SPEECH_RMS]
    if loud.size == 0:
        return 0.0
    low, high = np.percentile(20 * np.log10(loud), [10, 90])
    return float(high - low)


def trim(pcm: PcmChunk, max_seconds: float) -> PcmChunk:
    frame, levels = _frame_levels(pcm)
    loud = levels > _SPEECH_RMS
    start = int(np.argmax(loud)) * frame if loud.any() else 0
    end = start + round(max_seconds * pcm.sample_rate)
    return PcmChunk(pcm.samples[start:end], pcm.sample_rate)


def _frame_levels(pcm: PcmChunk) -> tuple[int, np.ndarray]:
    """The frame length in samples, and each whole frame's RMS level (1.0 is full scale)."""
    frame = max(1, round(_FRAME_SECONDS * pcm.sample_rate))
    count = pcm.num_samples // frame
    frames = pcm.samples[: count * frame].astype(np.float64).reshape(count, frame) / 32768.0
    return frame, np.sqrt(np.mean(frames**2, axis=1))
