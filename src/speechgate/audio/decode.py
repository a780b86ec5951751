"""A whole speech response decoded back to PCM, for what must hear it: word times estimated
for an upstream that cannot say when its words are heard."""

from __future__ import annotations

import io

import av
import numpy as np

from speechgate.audio.clip import UndecodableAudio
from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk

# Headerless bodies: what FFmpeg calls their demuxers.
_G711 = {AudioFormat.ULAW: "mulaw", AudioFormat.ALAW: "alaw"}


def decode_speech(data: bytes, fmt: AudioFormat, raw_rate: int) -> PcmChunk:
    """`data`, a whole body in `fmt`, as mono 16-bit PCM at the rate it was encoded at; a
    headerless body (pcm, ulaw, alaw) is taken at `raw_rate`. Raises UndecodableAudio."""
    if fmt is AudioFormat.PCM:
        return PcmChunk(np.frombuffer(data[: len(data) // 2 * 2], "<i2").copy(), raw_rate)
    demuxer = _G711.get(fmt)
    options = {"sample_rate": str(raw_rate)} if demuxer else {}
    parts: list[np.ndarray] = []
    try:
        with av.open(io.BytesIO(data), mode="r", format=demuxer, options=options) as container:
            if not container.streams.audio:
                raise UndecodableAudio("the body has no audio stream")
            stream = container.streams.audio[0]
            rate = stream.sample_rate or raw_rate
            resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
            for frame in container.decode(stream):
                parts += [out.to_ndarray().reshape(-1) for out in resampler.resample(frame)]
            parts += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
    except av.FFmpegError as error:
        raise UndecodableAudio(str(error)) from None
    samples = np.concatenate(parts) if parts else np.zeros(0, np.int16)
    return PcmChunk(samples.astype(np.int16, copy=False), rate)
