"""Decode response bodies back to samples, so tests can check the audio itself."""

from __future__ import annotations

import functools
import io
import math
import struct
import wave
from dataclasses import dataclass

import av
import numpy as np
import numpy.typing as npt

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineConfig, SynthesisRequest
from tests.helpers.settings import engine_data_dir

# ffmpeg's demuxer for each `response_format`; naming it, rather than letting ffmpeg probe,
# also checks that a body is in the container its format promises.
# Long enough for a voice prompt (over 3 s of speech), with voiced and unvoiced sounds.
_SPEECH_TEXT = "The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore."

_DEMUXERS = {
    "mp3": "mp3",
    "opus": "ogg",
    "aac": "aac",
    "flac": "flac",
    "wav": "wav",
    "ulaw": "mulaw",
    "alaw": "alaw",
}
# Headerless, so the demuxer must be told the rate; decoded by ffmpeg's own G.711 decoders.
_RAW_G711 = ("ulaw", "alaw")


@dataclass(frozen=True)
class DecodedAudio:
    """Mono float32 samples in [-1, 1] (s16 input maps exactly: x / 32768) and their rate.

    Ogg Opus always decodes at 48000 Hz, whatever rate it was encoded at: that is the rate of
    Opus itself, and ffmpeg does not resample to the header's "input sample rate".
    """

    samples: npt.NDArray[np.float32]
    sample_rate: int

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sample_rate

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(np.square(self.samples)))) if len(self.samples) else 0.0

    def to_int16(self) -> npt.NDArray[np.int16]:
        """The samples as s16 again: exact for audio that was s16 all along."""
        return np.round(self.samples * 32768.0).astype(np.int16)


def decode_audio(data: bytes, fmt: str, pcm_rate: int = 24000) -> DecodedAudio:
    """Decode a whole body of `fmt` ("mp3", "opus", ..., "pcm", "ulaw", "alaw": an
    `AudioFormat` value); headerless pcm, ulaw and alaw are taken at `pcm_rate`."""
    if fmt == "pcm":
        samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
        return DecodedAudio(samples, pcm_rate)
    options = {"sample_rate": str(pcm_rate)} if fmt in _RAW_G711 else {}
    with av.open(io.BytesIO(data), mode="r", format=_DEMUXERS[fmt], options=options) as container:
        stream = container.streams.audio[0]
        # Convert whatever the decoder yields (fltp, s16, s32p...) to packed float mono,
        # keeping the decoded rate.
        resampler = av.AudioResampler(format="flt", layout="mono")
        frames = [out for frame in container.decode(stream) for out in resampler.resample(frame)]
        frames += resampler.resample(None)
        sample_rate = frames[0].sample_rate if frames else stream.sample_rate
    parts = [frame.to_ndarray().reshape(-1) for frame in frames]
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    return DecodedAudio(samples.astype(np.float32, copy=False), sample_rate)


def flac_total_samples(data: bytes) -> int:
    """The sample count a FLAC file's STREAMINFO declares (0: unknown, as in a stream)."""
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # STREAMINFO is the first block
    # After min/max block size (2+2) and min/max frame size (3+3): 20 bits of sample rate,
    # 3 of channels, 5 of bits per sample, then 36 bits of total samples.
    packed = int.from_bytes(data[18:26], "big")
    return packed & ((1 << 36) - 1)


def flac_bomb(hours: float, rate: int = 48000, level: int = 8192) -> bytes:
    """A FLAC file of `hours` of DC, written by hand: 65535-sample frames whose one subframe
    is CONSTANT (3 bytes), so each frame takes ~15 bytes and 4 h fit in ~160 KB (at 8 kHz, in
    ~27 KB). What a decompression bomb for a voice upload looks like."""
    block = 65535
    frames = math.ceil(hours * 3600 * rate / block)
    streaminfo = (
        struct.pack(">HH", block, block)
        + (0).to_bytes(3, "big") * 2
        # 20 bits rate, 3 bits channels - 1 (mono), 5 bits bits per sample - 1 (16), 36 bits
        # of total samples.
        + ((rate << 44) | (0 << 41) | (15 << 36) | frames * block).to_bytes(8, "big")
        + bytes(16)
    )
    out = bytearray(b"fLaC" + bytes([0x80]) + len(streaminfo).to_bytes(3, "big") + streaminfo)
    for number in range(frames):
        # Fixed blocking; block size in 16 bits at the end; rate from STREAMINFO; mono;
        # 16 bits per sample.
        header = bytearray([0xFF, 0xF8, 0x70, 0x08])
        header += chr(number).encode("utf-8", "surrogatepass") + struct.pack(">H", block - 1)
        header.append(_crc8(header))
        frame = header + bytes([0x00]) + struct.pack(">h", level)  # a CONSTANT subframe
        out += frame + struct.pack(">H", _crc16(frame))
    return bytes(out)


def _crc8(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


@functools.cache
def piper_speech(text: str = _SPEECH_TEXT) -> PcmChunk:
    """Real speech for tests that need some: the embedded Piper voice saying `text`, in
    process (22050 Hz mono), loaded from the run's optimized copy of the voice."""
    from speechgate.engines.piper.engine import PiperEngine

    engine = PiperEngine.from_config(EngineConfig("piper", data_dir=engine_data_dir("piper")))
    try:
        voice = engine.voices()[0].id
        parts = [chunk.samples for chunk in engine.synthesize(SynthesisRequest(text, voice))]
        return PcmChunk(np.concatenate(parts), engine.sample_rate)
    finally:
        engine.close()


def wav_file(pcm: PcmChunk) -> bytes:
    """`pcm` as a mono 16-bit WAV file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(pcm.sample_rate)
        wav.writeframes(pcm.samples.astype("<i2").tobytes())
    return out.getvalue()


def sibilant_onset(pcm: PcmChunk, near: float) -> float | None:
    """Where the noise of a sibilant (/s/, /sh/) around `near` seconds begins: the start of the
    run of 10 ms windows (2.5 ms apart, 30 ms at least) with most of their energy above 4 kHz
    that holds `near`, else of the first that starts within 100 ms after it. After a vowel, that
    is where the word begins, to a few milliseconds."""
    rate, width, hop = pcm.sample_rate, round(0.01 * pcm.sample_rate), 0.0025
    lo = max(0, round((near - 0.2) * rate))
    hi = min(pcm.num_samples, round((near + 0.2) * rate)) - width
    starts = np.arange(lo, max(lo, hi), hop * rate).astype(int)
    frames = pcm.samples[starts[:, None] + np.arange(width)].astype(np.float64) * np.hanning(width)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    high = power[:, np.fft.rfftfreq(width, 1 / rate) > 4000].sum(1)
    noisy = (np.sqrt((frames**2).mean(1)) > 60) & (high > 0.5 * power.sum(1))
    centres = (starts + width // 2) / rate
    runs: list[tuple[float, float]] = []
    begin: int | None = None
    for index, flag in enumerate([*noisy, False]):
        if flag and begin is None:
            begin = index
        elif not flag and begin is not None:
            if (index - begin) * hop >= 0.03:
                runs.append((float(centres[begin]), float(centres[index - 1])))
            begin = None
    for start, end in runs:
        if start <= near <= end:
            return start
    return next((start for start, _ in runs if near < start <= near + 0.1), None)
