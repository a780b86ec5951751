"""Streaming encoders: PCM chunks in, bytes of a response body out, as soon as they are ready.

    encoder = StreamEncoder(AudioFormat.OPUS, input_rate=engine.sample_rate, output_rate=24000)
    for chunk in engine.synthesize(request):
        yield encoder.encode(chunk)
    yield encoder.finish()

An encoder is stateful and not thread-safe: one per response. Given a seekable `file`, it
writes there and completes the headers a stream cannot. Every format decodes to the PCM's
length, or at most one codec frame more.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import BinaryIO

import av
import numpy as np
from av.audio.frame import AudioFrame
from av.audio.stream import AudioStream

from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk


@dataclass(frozen=True)
class _Codec:
    muxer: str
    codec: str
    muxer_options: Mapping[str, str] = field(default_factory=dict)
    codec_options: Mapping[str, str] = field(default_factory=dict)
    bit_rate: int | None = None


_CODECS: dict[AudioFormat, _Codec] = {
    # libmp3lame's default is audibly poor for speech; 64 kb/s is valid at every MPEG rate.
    AudioFormat.MP3: _Codec("mp3", "libmp3lame", bit_rate=64_000),
    # The ogg muxer holds packets until a page spans `page_duration` (1 s by default); three
    # Opus frames a page hold little back at a modest cost in page headers.
    AudioFormat.OPUS: _Codec(
        "ogg",
        "libopus",
        muxer_options={"page_duration": "60000"},
        codec_options={"frame_duration": "20"},
    ),
    AudioFormat.AAC: _Codec("adts", "aac"),
    # The FLAC muxer reserves 8 KiB of padding to rewrite tags in place later, which a
    # non-seekable stream never can.
    AudioFormat.FLAC: _Codec("flac", "flac", muxer_options={"metadata_header_padding": "0"}),
    AudioFormat.ULAW: _Codec("mulaw", "pcm_mulaw"),
    AudioFormat.ALAW: _Codec("alaw", "pcm_alaw"),
}


# When a client names the bit rate (`opus_48000_32`): libopus' default VBR overshoots on steady,
# tonal audio; constrained VBR keeps to the rate the name promises.
_NAMED_BIT_RATE_OPTIONS: dict[AudioFormat, dict[str, str]] = {
    AudioFormat.OPUS: {"vbr": "constrained"},
}

# Priming a decoder plays in a stream that cannot say so: none, as AAC's priming frame is not
# sent, MP3 has a LAME tag and Ogg Opus its pre-skip.
_STREAM_PRIMING: dict[AudioFormat, int] = {}


def stream_priming(fmt: AudioFormat, output_rate: int) -> float:
    """Seconds of silence a decoder plays before the first input sample of a `fmt` stream."""
    return _STREAM_PRIMING.get(fmt, 0) / output_rate


_LAME_ENCODER_DELAY = 576
# An MP3 decoder adds its filter bank's delay to the LAME tag's, and skips it too.
_MP3_DECODER_DELAY = 529


def _crc16(data: bytes) -> int:
    """CRC-16/ARC (reflected 0x8005, as LAME and libavformat compute the LAME tag's CRC)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def _lame_tag_frame(first_header: bytes, bit_rate: int, sample_rate: int) -> bytes:
    """An Info frame with a LAME tag for a CBR MP3 stream, telling decoders to drop the
    encoder's delay (others hear one frame of silence). A stream knows no frame count nor end
    padding; the byte count is "unknown", as libavformat skips the tag's own frame only when
    the tag gives a count or a size."""
    mpeg1 = bool(first_header[1] & 0x08)
    mono = first_header[3] >> 6 == 3
    # Same stream parameters; no CRC (protection bit set) and no padding slot.
    header = bytes(
        (first_header[0], first_header[1] | 0x01, first_header[2] & 0xFD, first_header[3])
    )
    side_info = (17 if mono else 32) if mpeg1 else (9 if mono else 17)
    frame_size = (144 if mpeg1 else 72) * bit_rate // sample_rate
    xing_bytes_flag = 0x02
    tag = (
        header
        + bytes(side_info)
        + b"Info"
        + struct.pack(">II", xing_bytes_flag, 0xFFFFFFFF)
        # LAME extension: only the encoder delay is known; padding and lengths are not.
        + b"LAME3.100"
        + bytes((0x01, 0))
        + bytes(4 + 2 + 2 + 1)
        + bytes((min(bit_rate // 1000, 255),))
        + (_LAME_ENCODER_DELAY << 12).to_bytes(3, "big")
        + bytes(1 + 1 + 2 + 4 + 2)
    )
    tag += struct.pack(">H", _crc16(tag))
    return tag + bytes(frame_size - len(tag))


class StreamEncoder:
    """Encodes mono PCM at `input_rate` to `format` at `output_rate`, chunk by chunk: `encode`
    returns all the codec has released, `finish` the rest. Raises `ValueError` if `format`
    cannot be encoded at `output_rate` or takes no bit rate."""

    def __init__(
        self,
        format: AudioFormat | str,
        input_rate: int,
        output_rate: int,
        file: BinaryIO | None = None,
        bit_rate: int | None = None,
    ) -> None:
        self.format = AudioFormat(format)
        self.format.check_sample_rate(output_rate)
        if input_rate <= 0:
            raise ValueError(f"input rate must be positive; got {input_rate}")
        if bit_rate is not None and self.format.sample_width is not None:
            raise ValueError(f"{self.format} output has no bit rate to set")
        self.input_rate = input_rate
        self.output_rate = output_rate
        self._backend: _RawBackend | _MuxerBackend
        if self.format in _CODECS:
            self._backend = _MuxerBackend(self.format, output_rate, file, bit_rate)
        else:
            self._backend = _RawBackend(self.format, output_rate, file)
        # One resampler across calls: its filter state leaves no clicks at chunk boundaries.
        self._resampler = av.AudioResampler(
            format=self._backend.sample_format, layout="mono", rate=output_rate
        )
        self._next_pts = 0
        self._closed = False
        self.priming = stream_priming(self.format, output_rate)
        """Seconds of silence a decoder plays before the first input sample."""

    @property
    def content_type(self) -> str:
        return self.format.content_type

    def encode(self, chunk: PcmChunk) -> bytes:
        self._check_open()
        if chunk.sample_rate != self.input_rate:
            raise ValueError(
                f"chunk is at {chunk.sample_rate} Hz; this encoder takes {self.input_rate} Hz"
            )
        if chunk.num_samples == 0:
            return self._backend.drain()
        frame = AudioFrame.from_ndarray(
            np.ascontiguousarray(chunk.samples).reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = self.input_rate
        # Contiguous timestamps let the encoder and muxer stamp packets (Ogg granules) exactly.
        frame.time_base = Fraction(1, self.input_rate)
        frame.pts = self._next_pts
        self._next_pts += chunk.num_samples
        for resampled in self._resampler.resample(frame):
            self._backend.write(resampled)
        return self._backend.drain()

    def finish(self) -> bytes:
        self._check_open()
        for resampled in self._resampler.resample(None):
            self._backend.write(resampled)
        self._closed = True
        return self._backend.finish()

    def close(self) -> None:
        """Abandon the stream and release the codec. Idempotent."""
        if not self._closed:
            self._closed = True
            self._backend.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the encoder is finished or closed")


def encode_all(
    chunks: Iterable[PcmChunk],
    format: AudioFormat | str,
    output_rate: int,
    bit_rate: int | None = None,
) -> bytes:
    """Encode a whole stream at once; the input rate is taken from the first chunk."""
    parts: list[bytes] = []
    encoder: StreamEncoder | None = None
    for chunk in chunks:
        if encoder is None:
            encoder = StreamEncoder(format, chunk.sample_rate, output_rate, bit_rate=bit_rate)
        parts.append(encoder.encode(chunk))
    if encoder is None:  # no audio: still a valid, empty stream
        encoder = StreamEncoder(format, output_rate, output_rate, bit_rate=bit_rate)
    parts.append(encoder.finish())
    return b"".join(parts)


_WAV_HEADER_SIZE = 44
_UNKNOWN_SIZE = 0xFFFFFFFF


def _wav_header(sample_rate: int, data_size: int = _UNKNOWN_SIZE) -> bytes:
    """A 44-byte RIFF/WAVE header for mono s16 PCM of `data_size` bytes; a stream's sizes are
    0xFFFFFFFF, as in OpenAI's streamed WAV, which decoders read to its end."""
    riff_size = _UNKNOWN_SIZE if data_size == _UNKNOWN_SIZE else data_size + _WAV_HEADER_SIZE - 8
    channels, sample_width = 1, 2
    return (
        struct.pack("<4sI4s", b"RIFF", riff_size, b"WAVE")
        + struct.pack(
            "<4sIHHIIHH",
            b"fmt ",
            16,  # size of the PCM fmt chunk
            1,  # WAVE_FORMAT_PCM
            channels,
            sample_rate,
            sample_rate * channels * sample_width,  # byte rate
            channels * sample_width,  # block align
            8 * sample_width,  # bits per sample
        )
        + struct.pack("<4sI", b"data", data_size)
    )


class _RawBackend:
    """`pcm` (bare s16le) and `wav` (the same behind a header): no codec at all."""

    sample_format = "s16"

    def __init__(self, format: AudioFormat, sample_rate: int, file: BinaryIO | None) -> None:
        self._wav = format is AudioFormat.WAV
        self._sample_rate = sample_rate
        self._file = file
        self._start = file.tell() if file is not None else 0
        self._data_size = 0
        self._pending = bytearray(_wav_header(sample_rate) if self._wav else b"")

    def write(self, frame: AudioFrame) -> None:
        data = frame.to_ndarray().astype("<i2", copy=False).tobytes()
        self._data_size += len(data)
        self._pending += data

    def drain(self) -> bytes:
        data = bytes(self._pending)
        self._pending.clear()
        if self._file is None:
            return data
        self._file.write(data)
        return b""

    def finish(self) -> bytes:
        data = self.drain()
        if self._file is not None and self._wav:
            end = self._file.tell()
            self._file.seek(self._start)
            self._file.write(_wav_header(self._sample_rate, self._data_size))
            self._file.seek(end)
        return data

    def close(self) -> None:
        self._pending.clear()


class _Sink:
    """The container's output: write-only, so muxers never seek back to patch headers and
    write what a live stream can carry."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def write(self, data: bytes) -> int:
        self._buffer += data
        return len(data)

    def drain(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


class _MuxerBackend:
    """A PyAV codec in a PyAV container, written to a `_Sink`.

    AAC's first frame decodes to the priming, which ADTS cannot tell a decoder to drop, so it
    is not sent (changing only the start of the engine's leading silence). A streamed MP3 stops
    at the frame that completes its audio, as the LAME tag cannot give the end padding.
    """

    def __init__(
        self,
        format: AudioFormat,
        sample_rate: int,
        file: BinaryIO | None,
        bit_rate: int | None = None,
    ) -> None:
        codec = _CODECS[format]
        self._sink = _Sink()
        output: BinaryIO | _Sink = file if file is not None else self._sink
        # Every packet must reach the sink at once, not sit in the I/O buffer.
        options = {"flush_packets": "1", **codec.muxer_options}
        # A stream gets our LAME tag before its first frame; a seekable file the muxer's.
        self._lame_tag = format is AudioFormat.MP3 and file is None
        if self._lame_tag:
            options["id3v2_version"] = "0"
        self._container = av.open(output, mode="w", format=codec.muxer, options=options)
        codec_options = dict(codec.codec_options)
        if bit_rate is not None:
            codec_options.update(_NAMED_BIT_RATE_OPTIONS.get(format, {}))
        stream = self._container.add_stream(
            codec.codec, rate=sample_rate, layout="mono", options=codec_options
        )
        assert isinstance(stream, AudioStream)
        self._stream = stream
        bit_rate = bit_rate or codec.bit_rate
        if bit_rate is not None:
            self._stream.bit_rate = bit_rate
        # A stream that ends without audio still needs its header.
        self._container.start_encoding()
        self.sample_format = self._stream.format.name
        self._skip_priming = format is AudioFormat.AAC
        self._trim_padding = format is AudioFormat.MP3 and file is None
        self._samples = 0
        self._packets = 0

    def write(self, frame: AudioFrame) -> None:
        self._samples += frame.samples
        self._mux(self._stream.encode(frame))

    def _mux(self, packets: list[av.Packet[AudioStream]]) -> None:
        if self._skip_priming and packets:
            self._skip_priming = False
            packets = packets[1:]
        self._packets += len(packets)
        self._container.mux(packets)

    def drain(self) -> bytes:
        data = self._sink.drain()
        if self._lame_tag and data:
            self._lame_tag = False
            rate = self._stream.rate
            data = _lame_tag_frame(data[:4], self._stream.bit_rate or 0, rate) + data
        return data

    def finish(self) -> bytes:
        packets = self._stream.encode(None)
        if self._trim_padding:
            # A decoder skips the delays, then plays a frame's samples per frame.
            needed = -(
                -(self._samples + _LAME_ENCODER_DELAY + _MP3_DECODER_DELAY)
                // self._stream.codec_context.frame_size
            )
            packets = packets[: max(0, needed - self._packets)]
        self._mux(packets)
        self._container.close()
        return self.drain()

    def close(self) -> None:
        self._container.close()
