"""Streaming encoders, checked by decoding what they produce."""

from __future__ import annotations

import struct
import wave
from pathlib import Path

import av
import numpy as np
import numpy.typing as npt
import pytest

from speechgate.audio.encoders import StreamEncoder, encode_all
from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk
from tests.helpers.audio import DecodedAudio, decode_audio, flac_total_samples

TONE_HZ = 440.0
CHUNK_SECONDS = 0.1

# Bound on decoded samples beyond the input's: the fill of the last frame, less than one
# codec frame (AAC's 1024 samples, MP3's 576 below 32 kHz). AAC's priming frame is not sent and
# an MP3's LAME tag gives its delay. Ogg Opus signals its pre-skip and end trim, and FLAC, WAV
# and PCM have neither, so those decode to the exact length.
MAX_PADDING = {AudioFormat.MP3: 576, AudioFormat.AAC: 1024}


def codec_frame(fmt: AudioFormat, rate: int) -> int:
    """Samples in one frame of `fmt`: AAC-LC's 1024; MP3's 1152 (MPEG-1, 32 kHz and up), else
    576."""
    if fmt is AudioFormat.AAC:
        return 1024
    return 1152 if rate >= 32000 else 576


@pytest.mark.parametrize("fmt", [AudioFormat.AAC, AudioFormat.MP3])
@pytest.mark.parametrize("rate", [8000, 16000, 22050, 24000, 44100, 48000])
def test_compressed_streams_decode_within_one_frame_of_their_pcm(
    fmt: AudioFormat, rate: int
) -> None:
    # AAC decoded 1024 samples of priming plus the last frame's fill beyond its PCM (75-78 ms at
    # 24 kHz), MP3 the padding libmp3lame flushes (up to 76 ms at 8 kHz).
    frame = codec_frame(fmt, rate)
    for seconds in (0.5, 1.0, 1.37, 2.71):
        samples = tone(seconds, 24000)
        encoder = StreamEncoder(fmt, 24000, rate)
        data = b"".join(encoder.encode(c) for c in split(samples, 24000)) + encoder.finish()
        decoded = decode_audio(data, fmt)
        assert decoded.sample_rate == rate
        extra = len(decoded.samples) - round(seconds * rate)
        assert 0 <= extra < frame, (seconds, extra)
        # The tone is all there, to its end: nothing was cut to make the length.
        tail = decoded.samples[round(seconds * rate) - frame : round(seconds * rate)]
        assert np.sqrt(np.mean(np.square(tail))) > 0.3


# Ogg Opus always decodes at 48 kHz, the rate Opus runs at internally; the rate it was
# encoded at is only a hint in its header, which ffmpeg does not resample to.
OPUS_DECODE_RATE = 48000


def tone(seconds: float, rate: int) -> npt.NDArray[np.int16]:
    t = np.arange(round(seconds * rate)) / rate
    return PcmChunk.from_float(0.5 * np.sin(2 * np.pi * TONE_HZ * t), rate).samples


def split(samples: npt.NDArray[np.int16], rate: int) -> list[PcmChunk]:
    step = round(CHUNK_SECONDS * rate)
    return [PcmChunk(samples[i : i + step], rate) for i in range(0, len(samples), step)]


def dominant_frequency(audio: DecodedAudio) -> float:
    spectrum = np.abs(np.fft.rfft(audio.samples))
    return float(np.argmax(spectrum)) * audio.sample_rate / len(audio.samples)


def decoded_rate(fmt: AudioFormat, output_rate: int) -> int:
    return OPUS_DECODE_RATE if fmt is AudioFormat.OPUS else output_rate


ROUND_TRIPS = [
    *[(fmt, in_rate, 24000) for fmt in AudioFormat for in_rate in (22050, 24000)],
    (AudioFormat.OPUS, 24000, 48000),
    (AudioFormat.PCM, 24000, 16000),
]


@pytest.mark.parametrize(("fmt", "input_rate", "output_rate"), ROUND_TRIPS)
def test_round_trip_keeps_length_pitch_and_energy(
    fmt: AudioFormat, input_rate: int, output_rate: int
) -> None:
    seconds = 1.5
    data = encode_all(split(tone(seconds, input_rate), input_rate), fmt, output_rate)

    audio = decode_audio(data, fmt, pcm_rate=output_rate)

    assert audio.sample_rate == decoded_rate(fmt, output_rate)
    # Nothing is lost at the end, and only the codec's priming and padding are added. That is
    # tighter than "duration within 5%", which AAC's ~0.08 s of priming and padding would
    # break for a 1.5 s input.
    extra = len(audio.samples) - round(seconds * audio.sample_rate)
    assert 0 <= extra < MAX_PADDING.get(fmt, 1)
    assert audio.rms > 0.3  # a 0.5-amplitude sine has an RMS of 0.354
    assert dominant_frequency(audio) == pytest.approx(TONE_HZ, rel=0.01)


@pytest.mark.parametrize("fmt", [AudioFormat.WAV, AudioFormat.PCM, AudioFormat.FLAC])
def test_lossless_formats_at_the_input_rate_are_exact(fmt: AudioFormat) -> None:
    samples = tone(1.5, 24000)

    audio = decode_audio(encode_all(split(samples, 24000), fmt, 24000), fmt)

    np.testing.assert_array_equal(audio.to_int16(), samples)


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_chunk_boundaries_do_not_change_the_audio(fmt: AudioFormat) -> None:
    # The resampler and the codec keep their state across calls, so 100 ms chunks must give
    # the same audio as one big chunk: no clicks, gaps or repeats at the seams.
    samples = tone(1.0, 22050)

    chunked = decode_audio(encode_all(split(samples, 22050), fmt, 24000), fmt)
    whole = decode_audio(encode_all([PcmChunk(samples, 22050)], fmt, 24000), fmt)

    np.testing.assert_array_equal(chunked.samples, whole.samples)


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_audio_streams_out_before_finish(fmt: AudioFormat) -> None:
    max_lag = 0.25  # seconds of fed audio not yet decodable from the bytes out so far
    encoder = StreamEncoder(fmt, input_rate=24000, output_rate=24000)
    sent = b""
    fed = 0.0
    for chunk in split(tone(3.0, 24000), 24000):
        sent += encoder.encode(chunk)
        fed += chunk.duration
        assert fed - decodable_seconds(sent, fmt) <= max_lag, f"after {fed:.1f} s in"

    whole = sent + encoder.finish()

    assert decode_audio(whole, fmt).duration == pytest.approx(3.0, rel=0.05)


def decodable_seconds(data: bytes, fmt: AudioFormat) -> float:
    try:
        return decode_audio(data, fmt).duration
    except av.FFmpegError:  # too little yet for ffmpeg to find the stream's parameters
        return 0.0


def test_content_types() -> None:
    assert {fmt.value: fmt.content_type for fmt in AudioFormat} == {
        "mp3": "audio/mpeg",
        "opus": "audio/ogg",
        "aac": "audio/aac",
        "flac": "audio/flac",
        "wav": "audio/wav",
        "pcm": "audio/pcm",
        "ulaw": "audio/basic",
        "alaw": "audio/x-alaw-basic",
    }
    assert StreamEncoder("opus", 24000, 24000).content_type == "audio/ogg"


def test_unknown_format_is_rejected() -> None:
    with pytest.raises(ValueError):
        AudioFormat("ogg")


@pytest.mark.parametrize(
    ("fmt", "rate"),
    [("opus", 8000), ("opus", 48000), ("mp3", 22050), ("aac", 44100), ("wav", 22050)],
)
def test_supported_sample_rates_pass(fmt: str, rate: int) -> None:
    AudioFormat(fmt).check_sample_rate(rate)


@pytest.mark.parametrize(
    ("fmt", "rate", "message"),
    [
        ("opus", 22050, "opus output supports sample rates 8000, 12000, 16000, 24000, 48000 Hz"),
        ("mp3", 96000, "mp3 output supports sample rates 8000, 11025, 12000,"),
        ("aac", 7350, "aac output supports sample rates 8000, 11025,"),
        ("pcm", 4000, "pcm output supports sample rates any rate from 8000 to 48000 Hz"),
        ("flac", 96000, "flac output supports sample rates any rate from 8000 to 48000 Hz"),
    ],
)
def test_unsupported_sample_rates_are_rejected_with_the_allowed_ones(
    fmt: str, rate: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        AudioFormat(fmt).check_sample_rate(rate)
    assert str(raised.value).endswith(f"got {rate}")
    with pytest.raises(ValueError, match=message):
        StreamEncoder(fmt, 24000, rate)


def test_wav_header_declares_unknown_sizes() -> None:
    data = encode_all(split(tone(0.5, 24000), 24000), "wav", 16000)

    riff, riff_size, wave, fmt_id, fmt_size = struct.unpack_from("<4sI4s4sI", data, 0)
    codec, channels, rate, byte_rate, align, bits = struct.unpack_from("<HHIIHH", data, 20)
    data_id, data_size = struct.unpack_from("<4sI", data, 36)
    assert (riff, wave, fmt_id, fmt_size, data_id) == (b"RIFF", b"WAVE", b"fmt ", 16, b"data")
    assert riff_size == data_size == 0xFFFFFFFF
    assert (codec, channels, rate, byte_rate, align, bits) == (1, 1, 16000, 32000, 2, 16)
    assert len(data) == 44 + 2 * 8000


@pytest.mark.parametrize("fmt", list(AudioFormat))
def test_a_stream_without_audio_finishes(fmt: AudioFormat) -> None:
    data = encode_all([], fmt, 24000)

    if fmt in (AudioFormat.WAV, AudioFormat.FLAC, AudioFormat.PCM):
        assert len(decode_audio(data, fmt).samples) == 0


def test_chunks_at_another_rate_are_rejected() -> None:
    encoder = StreamEncoder("mp3", input_rate=24000, output_rate=24000)
    with pytest.raises(ValueError, match="22050 Hz"):
        encoder.encode(PcmChunk(tone(0.1, 22050), 22050))
    encoder.close()


def test_a_finished_or_closed_encoder_refuses_more_audio() -> None:
    chunk = PcmChunk(tone(0.1, 24000), 24000)
    finished = StreamEncoder("aac", 24000, 24000)
    finished.finish()
    closed = StreamEncoder("opus", 24000, 24000)
    closed.encode(chunk)
    closed.close()
    closed.close()  # idempotent

    for encoder in (finished, closed):
        with pytest.raises(RuntimeError):
            encoder.encode(chunk)
        with pytest.raises(RuntimeError):
            encoder.finish()


@pytest.mark.parametrize("fmt", [AudioFormat.WAV, AudioFormat.FLAC, AudioFormat.MP3])
def test_a_seekable_file_gets_complete_headers(fmt: AudioFormat, tmp_path: Path) -> None:
    samples = tone(1.3, 24000)
    path = tmp_path / f"out.{fmt.value}"
    with path.open("wb") as file:
        encoder = StreamEncoder(fmt, 24000, 24000, file)
        assert b"".join(encoder.encode(chunk) for chunk in split(samples, 24000)) == b""
        assert encoder.finish() == b""
    data = path.read_bytes()
    decoded = decode_audio(data, fmt)
    # MP3 included: its LAME tag gives the encoder delay and padding, which decoders trim.
    assert len(decoded.samples) == len(samples)
    if fmt is AudioFormat.WAV:
        with wave.open(str(path)) as reader:
            assert reader.getnframes() == len(samples)
    if fmt is AudioFormat.FLAC:
        assert flac_total_samples(data) == len(samples)


def test_a_flac_stream_declares_an_unknown_length() -> None:
    data = encode_all(split(tone(0.5, 24000), 24000), "flac", 24000)
    assert flac_total_samples(data) == 0


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 44100, 48000])
def test_a_streamed_mp3_starts_where_its_pcm_starts(rate: int) -> None:
    # A click 0.25 s in: in the decoded stream it must be 0.25 s in too, the encoder's priming
    # (and the decoder's delay) dropped by decoders that read the stream's LAME tag.
    samples = np.zeros(24000, dtype=np.int16)
    samples[6000:6024] = 20000
    encoder = StreamEncoder("mp3", 24000, rate)
    data = b"".join(encoder.encode(chunk) for chunk in split(samples, 24000)) + encoder.finish()
    assert encoder.priming == 0.0

    decoded = decode_audio(data, "mp3")

    click = int(np.argmax(np.abs(decoded.samples)))
    assert click / rate == pytest.approx(0.25, abs=0.0015)
    # The rest is the last frame's padding.
    assert 0 <= len(decoded.samples) - rate < (1152 if rate >= 32000 else 576)


def snr_db(reference: npt.NDArray[np.int16], decoded: npt.NDArray[np.int16]) -> float:
    signal = reference.astype(np.float64)
    noise = signal - decoded.astype(np.float64)
    return float(10 * np.log10(np.sum(signal**2) / np.sum(noise**2)))


@pytest.mark.parametrize(("fmt", "other"), [("ulaw", "alaw"), ("alaw", "ulaw")])
def test_g711_decodes_back_to_its_source_pcm(fmt: str, other: str) -> None:
    # A tone swelling from -46 dBFS to near full scale, so the companding's whole range is
    # used; PyAV's own decoder is the reference for the law.
    rate = 8000
    t = np.arange(2 * rate) / rate
    swell = np.geomspace(0.005, 0.9, len(t)) * np.sin(2 * np.pi * TONE_HZ * t)
    source = PcmChunk.from_float(swell, rate).samples

    data = encode_all(split(source, rate), fmt, rate)

    assert len(data) == len(source)  # one byte a sample, no header
    decoded = decode_audio(data, fmt, pcm_rate=rate).to_int16()
    assert len(decoded) == len(source)
    # G.711's ~38 dB, at every level of the swell: the quietest second alone holds it too.
    assert snr_db(source, decoded) > 33
    assert snr_db(source[:rate], decoded[:rate]) > 33
    # Read with the other law, the same bytes are noise: the law really is the one named.
    assert snr_db(source, decode_audio(data, other, pcm_rate=rate).to_int16()) < 10


@pytest.mark.parametrize(
    ("fmt", "rate", "kbps"),
    [("mp3", 44100, (32, 64, 96, 128, 192)), ("opus", 48000, (32, 64, 96, 128, 192))],
)
def test_higher_bit_rates_give_bigger_streams(fmt: str, rate: int, kbps: tuple[int, ...]) -> None:
    # A steady chord over noise: what libopus' unconstrained VBR spends well over its target on.
    seconds = 3.0
    t = np.arange(round(seconds * 24000)) / 24000
    rng = np.random.default_rng(0)
    mix = sum(0.2 * np.sin(2 * np.pi * f * t) for f in (220, 447, 1031, 3307))
    mix = mix + 0.05 * rng.standard_normal(len(t))
    samples = PcmChunk.from_float(mix, 24000).samples

    sizes = [len(encode_all(split(samples, 24000), fmt, rate, k * 1000)) for k in kbps]

    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes), sizes
    for size, k in zip(sizes, kbps, strict=True):
        # The rate asked for, plus the container's: Ogg's page headers cost 5-8 kb/s (see
        # encoders.py), mp3's LAME frame one frame.
        assert 0.9 * k * 1000 < size * 8 / seconds < k * 1000 + 9000, (k, size)


def test_mp3_at_a_named_rate_and_bit_rate_decodes_at_that_rate() -> None:
    data = encode_all(split(tone(1.5, 24000), 24000), "mp3", 22050, 32_000)

    audio = decode_audio(data, "mp3")

    assert audio.sample_rate == 22050
    assert dominant_frequency(audio) == pytest.approx(TONE_HZ, rel=0.01)
    assert len(data) * 8 / 1.5 == pytest.approx(32_000, rel=0.15)


@pytest.mark.parametrize("fmt", ["pcm", "wav", "ulaw", "alaw"])
def test_uncompressed_formats_take_no_bit_rate(fmt: str) -> None:
    with pytest.raises(ValueError, match="has no bit rate"):
        StreamEncoder(fmt, 24000, 24000, bit_rate=64_000)
