"""How many seconds of speech a response body holds."""

from __future__ import annotations

import io
import struct

import av

from speechgate.audio.formats import AudioFormat

PCM_SAMPLE_RATE = 24000
WAV_HEADER_BYTES = 44

_DEMUXERS = {
    AudioFormat.MP3: "mp3",
    AudioFormat.OPUS: "ogg",
    AudioFormat.AAC: "aac",
    AudioFormat.FLAC: "flac",
}


def wav_audio_seconds(data: bytes) -> float:
    """Seconds of PCM in a WAV body, from its length: the size fields of a streamed WAV are
    0xFFFFFFFF. Raises `ValueError` for anything that is not PCM WAV."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE body")
    offset, block_align, rate = 12, 0, 0
    while offset + 8 <= len(data):
        chunk_id, size = struct.unpack_from("<4sI", data, offset)
        body = offset + 8
        if chunk_id == b"fmt ":
            if body + 16 > len(data):
                break
            _tag, _channels, rate, _rate, block_align, _bits = struct.unpack_from(
                "<HHIIHH", data, body
            )
        elif chunk_id == b"data":
            if not rate or not block_align:
                raise ValueError("WAV data chunk before its fmt chunk")
            return (len(data) - body) // block_align / rate
        offset = body + size + (size & 1)  # chunks are padded to even sizes
    raise ValueError("WAV body has no data chunk")


def audio_seconds(data: bytes, format: AudioFormat) -> float:
    if format is AudioFormat.WAV:
        return wav_audio_seconds(data)
    if format is AudioFormat.PCM:
        return len(data) // 2 / PCM_SAMPLE_RATE
    if not data:
        return 0.0
    with av.open(io.BytesIO(data), mode="r", format=_DEMUXERS[format]) as container:
        stream = container.streams.audio[0]
        # Count decoded samples: container durations are missing or estimated in a live stream.
        samples, rate = 0, 0
        for frame in container.decode(stream):
            samples += frame.samples
            rate = frame.sample_rate
    return samples / rate if rate else 0.0


def audio_offset(format: AudioFormat) -> int:
    return WAV_HEADER_BYTES if format is AudioFormat.WAV else 0
