"""Streaming encoders: PCM chunks in, bytes of a response body out, as soon as they are ready.

    encoder = StreamEncoder(AudioFormat.OPUS, input_rate=engine.sample_rate, output_rate=24000)
    for chunk in engine.synthesize(request):
        yield encoder.encode(chunk)
    yield encoder.finish()

An encoder is stateful and not thread-safe: use one per response, from one thread at a time.

Given a seekable `file`, an encoder writes there instead and completes the headers a stream
cannot (WAV sizes, FLAC's sample count, MP3's Xing/LAME frame with the gapless delay and
padding); `encode` and `finish` then return nothing. A streamed MP3 starts with a LAME tag too,
with the delay but no padding or length, and ends at the first frame that completes its audio.
AAC in ADTS has no place for its priming: its first frame, which decodes to the priming, is
left out (see `_MuxerBackend`).

So every format decodes to the PCM's length, or at most one codec frame more (the last
frame's fill).
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
    bit_rate: int | None = None  # None: the codec's default


_CODECS: dict[AudioFormat, _Codec] = {
    # libmp3lame defaults to 1/11 of the PCM bit rate (~32 kb/s at 24 kHz), audibly poor for
    # speech; 64 kb/s is valid at every MPEG rate.
    AudioFormat.MP3: _Codec("mp3", "libmp3lame", bit_rate=64_000),
    # The ogg muxer holds packets until a page spans `page_duration` (1 s by default). 60 ms,
    # three 20 ms Opus frames, holds back at most ~0.1 s of audio and costs ~4 kb/s of page
    # headers; a page per frame would cost ~11 kb/s.
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
    # G.711 through ffmpeg's own codecs, into its headerless raw muxers.
    AudioFormat.ULAW: _Codec("mulaw", "pcm_mulaw"),
    AudioFormat.ALAW: _Codec("alaw", "pcm_alaw"),
}


# Codec options when a client names the bit rate (`opus_48000_32`). libopus' default VBR
# overshoots on steady, tonal audio (measured: 32 kb/s asked, 45 kb/s sent); constrained VBR
# keeps to the rate the name promises, within a few percent.
_NAMED_BIT_RATE_OPTIONS: dict[AudioFormat, dict[str, str]] = {
    AudioFormat.OPUS: {"vbr": "constrained"},
}

# Samples of priming a decoder plays before the first input sample, in a stream that cannot
# say so. None now: ADTS has no field for AAC's 1024, so its priming frame is not sent; a
# streamed MP3 marks its priming in a LAME tag (below) and Ogg Opus its pre-skip.
_STREAM_PRIMING: dict[AudioFormat, int] = {}


def stream_priming(fmt: AudioFormat, output_rate: int) -> float:
    """Seconds of silence a decoder plays before the first input sample of a `fmt` stream."""
    return _STREAM_PRIMING.get(fmt, 0) / output_rate


# libmp3lame's encoder delay at every rate, as it writes it in the LAME tag of a file.
_LAME_ENCODER_DELAY = 576
# What an MP3 decoder adds to the delay a LAME tag gives (its filter bank's), and skips too.
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
    """An Info frame with a LAME tag for a CBR MP3 stream whose first frame has `first_header`.

    It tells decoders that read it (libavformat, so PyAV and Chrome; Firefox; Safari) to drop
    the encoder's delay; others decode it as one frame of silence. A stream knows neither its
    frame count nor its end padding: the count is left out and the padding is 0. The byte count
    is 0xFFFFFFFF, unknown, as a streamed WAV's sizes: libavformat skips the tag's own frame only
    when the tag gives a count or a size.
    """
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
        # LAME extension: version, revision 0 / CBR, lowpass, peak, two replay gains, flags,
        # bit rate, then 12 bits of encoder delay and 12 of padding; misc, gain, preset,
        # music length, music CRC, all unknown.
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
    """Encodes mono PCM at `input_rate` to `format` at `output_rate`, chunk by chunk.

    `encode` returns everything the codec has released, so a client hears audio while later
    chunks are still being synthesized: all but the last ~0.1 s fed (codec lookahead, frame
    and Ogg page filling; ~0.25 s for mp3 and aac at 8 kHz). `finish` returns the rest.

    `bit_rate` (bits per second) sets a compressed codec's rate instead of its default here.

    Raises `ValueError` if `format` cannot be encoded at `output_rate`, or takes no bit rate.
    """

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
        # The resampler keeps filter state across calls, so chunk boundaries leave no clicks
        # or gaps; it also converts to the sample format the codec wants (s32p for mp3, ...).
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
        """Encode `chunk`; return the bytes ready now, possibly none."""
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
        """Flush the resampler, the codec and the container; return the rest of the stream."""
        self._check_open()
        for resampled in self._resampler.resample(None):
            self._backend.write(resampled)
        self._closed = True
        return self._backend.finish()

    def close(self) -> None:
        """Abandon the stream (say, the client left) and release the codec. Idempotent."""
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
    if encoder is None:  # No audio: still a valid (empty) stream, so no resampling is needed.
        encoder = StreamEncoder(format, output_rate, output_rate, bit_rate=bit_rate)
    parts.append(encoder.finish())
    return b"".join(parts)


_WAV_HEADER_SIZE = 44
_UNKNOWN_SIZE = 0xFFFFFFFF


def _wav_header(sample_rate: int, data_size: int = _UNKNOWN_SIZE) -> bytes:
    """A 44-byte RIFF/WAVE header for mono s16 PCM of `data_size` bytes.

    A streamed body cannot be rewound to fill in the sizes, so both are 0xFFFFFFFF, as in
    OpenAI's streamed WAV; ffmpeg and Python's `wave` read such a file to its end.
    """
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
    """The container's output: write-only, so PyAV treats it as non-seekable, like a socket.

    Muxers then never seek back to patch headers (mp3's Xing frame, FLAC's STREAMINFO
    totals); they write what a live stream can carry.
    """

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

    AAC's first frame decodes to the encoder's priming, 1024 samples before the first input
    sample, which ADTS cannot tell a decoder to drop: it is not sent. The frame after it then
    decodes without the overlap the first one held, which changes only its first 1024 samples,
    the start of a TTS engine's leading silence. A streamed MP3 stops at the frame that
    completes its audio (the LAME tag cannot give the end padding); the frames libmp3lame
    flushes after that hold only padding.
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
        # A seekable file lets the muxer go back and complete its headers at the end.
        output: BinaryIO | _Sink = file if file is not None else self._sink
        # Streaming relies on every packet reaching the sink at once rather than sitting in
        # the 32 KiB I/O buffer; ffmpeg's "auto" already does that for a non-seekable output,
        # but say so.
        options = {"flush_packets": "1", **codec.muxer_options}
        # A seekable MP3 file gets its LAME tag from the muxer, which writes it at the end; a
        # stream gets one of ours before its first frame (and no ID3 tag ahead of it).
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
        # Write the header now: a stream that ends without audio still gets one (an Ogg or
        # FLAC file is not even that without it).
        self._container.start_encoding()
        # The codec's preferred format; PyAV's encoder still cuts frames to the codec's size.
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
