"""Voice prompts from uploaded audio: decode any common format, check that it holds speech.

A clip is decoded with PyAV (WAV, MP3, Ogg/Opus, FLAC, M4A/AAC, WebM...), downmixed to mono and
resampled to the engine's rate. Speech is measured as 20 ms frames louder than -40 dBFS: enough
to tell a voice from silence or a hum-free room, without a voice-activity model.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import av
import numpy as np

from speechgate.audio.pcm import PcmChunk

_FRAME_SECONDS = 0.02
# -40 dBFS RMS: quiet speech is around -30, a silent room's noise floor below -60.
_SPEECH_RMS = 10 ** (-40 / 20)


class UndecodableAudio(ValueError):
    """The bytes are not audio that PyAV can decode (or hold no audio stream)."""


@dataclass(frozen=True)
class Clip:
    """A decoded voice prompt and how much of it is speech."""

    pcm: PcmChunk
    speech_seconds: float


def decode_clip(data: bytes, sample_rate: int) -> Clip:
    """Decode `data` to mono 16-bit PCM at `sample_rate`. Raises UndecodableAudio."""
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise UndecodableAudio("the file has no audio stream")
            resampler = av.AudioResampler(format="s16", layout="mono", rate=sample_rate)
            parts = [
                out.to_ndarray().reshape(-1)
                for frame in container.decode(audio=0)
                for out in resampler.resample(frame)
            ]
            parts += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
    except av.FFmpegError as error:
        raise UndecodableAudio(str(error)) from None
    samples = np.concatenate(parts) if parts else np.zeros(0, np.int16)
    pcm = PcmChunk(samples.astype(np.int16, copy=False), sample_rate)
    return Clip(pcm, speech_seconds(pcm))


def speech_seconds(pcm: PcmChunk) -> float:
    """Seconds of `pcm` in 20 ms frames louder than -40 dBFS."""
    frame, loud = _loud_frames(pcm)
    return float(np.count_nonzero(loud)) * frame / pcm.sample_rate


def trim(pcm: PcmChunk, max_seconds: float) -> PcmChunk:
    """`pcm` from its first loud frame on, cut to `max_seconds`."""
    frame, loud = _loud_frames(pcm)
    start = int(np.argmax(loud)) * frame if loud.any() else 0
    end = start + round(max_seconds * pcm.sample_rate)
    return PcmChunk(pcm.samples[start:end], pcm.sample_rate)


def _loud_frames(pcm: PcmChunk) -> tuple[int, np.ndarray]:
    """The frame length in samples, and for each whole frame whether it is louder than speech's
    floor."""
    frame = max(1, round(_FRAME_SECONDS * pcm.sample_rate))
    count = pcm.num_samples // frame
    frames = pcm.samples[: count * frame].astype(np.float64).reshape(count, frame) / 32768.0
    return frame, np.sqrt(np.mean(frames**2, axis=1)) > _SPEECH_RMS
