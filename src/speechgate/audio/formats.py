"""The output formats a client may ask for, and the one place their names are parsed.

A name is one of OpenAI's six or one of ElevenLabs' `output_format` names, which also fix the
rate and bit rate (`mp3_44100_128`). Each encoding knows its content type and sample rates, so
a request is validated before any audio is produced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

# 8 kHz is the lowest rate all codecs share; no engine produces more than 48 kHz.
_ANY_RATE = range(8000, 48000 + 1)


class AudioFormat(StrEnum):
    """An encoding of a response body; `ulaw` and `alaw` only through `ulaw_8000`/`alaw_8000`."""

    MP3 = "mp3"
    OPUS = "opus"
    AAC = "aac"
    FLAC = "flac"
    WAV = "wav"
    PCM = "pcm"
    ULAW = "ulaw"
    ALAW = "alaw"

    @property
    def content_type(self) -> str:
        return _CONTENT_TYPES[self]

    @property
    def sample_rates(self) -> Sequence[int]:
        return _SAMPLE_RATES[self]

    @property
    def sample_width(self) -> int | None:
        """Bytes per sample of an uncompressed body; None if compressed."""
        return _SAMPLE_WIDTHS.get(self)

    def check_sample_rate(self, rate: int) -> None:
        """Raise `ValueError`, with a message fit for a client, if `rate` is not supported."""
        rates = self.sample_rates
        if rate in rates:
            return
        if isinstance(rates, range):
            allowed = f"any rate from {rates.start} to {rates.stop - 1}"
        else:
            allowed = ", ".join(str(r) for r in rates)
        raise ValueError(f"{self} output supports sample rates {allowed} Hz; got {rate}")


OPENAI_FORMATS = (
    AudioFormat.MP3,
    AudioFormat.OPUS,
    AudioFormat.AAC,
    AudioFormat.FLAC,
    AudioFormat.WAV,
    AudioFormat.PCM,
)

_CONTENT_TYPES: dict[AudioFormat, str] = {
    AudioFormat.MP3: "audio/mpeg",
    # Opus is always sent in Ogg, as OpenAI does.
    AudioFormat.OPUS: "audio/ogg",
    AudioFormat.AAC: "audio/aac",
    AudioFormat.FLAC: "audio/flac",
    AudioFormat.WAV: "audio/wav",
    AudioFormat.PCM: "audio/pcm",
    # A-law has no registered type outside RTP; GStreamer and others use this one.
    AudioFormat.ULAW: "audio/basic",
    AudioFormat.ALAW: "audio/x-alaw-basic",
}

_SAMPLE_RATES: dict[AudioFormat, Sequence[int]] = {
    AudioFormat.MP3: (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
    AudioFormat.OPUS: (8000, 12000, 16000, 24000, 48000),
    AudioFormat.AAC: (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
    AudioFormat.FLAC: _ANY_RATE,
    AudioFormat.WAV: _ANY_RATE,
    AudioFormat.PCM: _ANY_RATE,
    # G.711 companding works at any rate; the names keep clients at 8 kHz.
    AudioFormat.ULAW: _ANY_RATE,
    AudioFormat.ALAW: _ANY_RATE,
}

_SAMPLE_WIDTHS = {AudioFormat.PCM: 2, AudioFormat.WAV: 2, AudioFormat.ULAW: 1, AudioFormat.ALAW: 1}


@dataclass(frozen=True)
class OutputFormat:
    """A `response_format` name, parsed: the encoding, and the rate and bit rate it fixes."""

    name: str
    format: AudioFormat
    sample_rate: int | None = None
    """None: the request's `sample_rate`, else the server's default."""
    bit_rate: int | None = None

    @property
    def content_type(self) -> str:
        return self.format.content_type

    def output_rate(self, requested: int | None, default: int) -> int:
        """The rate to encode at: the name's own, else `requested`, else `default`. Raises
        `ValueError`, fit for a client, if `requested` contradicts the name or cannot be."""
        if self.sample_rate is not None:
            if requested is not None and requested != self.sample_rate:
                raise ValueError(
                    f"{self.name} is {self.sample_rate} Hz audio; sample_rate {requested} "
                    "contradicts it (leave sample_rate out)"
                )
            return self.sample_rate
        rate = requested or default
        self.format.check_sample_rate(rate)
        return rate

    def __str__(self) -> str:
        return self.name


def _named(
    format: AudioFormat, rate: int | None = None, kbps: int | None = None
) -> tuple[str, OutputFormat]:
    name = "_".join(str(part) for part in (format, rate, kbps) if part is not None)
    return name, OutputFormat(name, format, rate, None if kbps is None else kbps * 1000)


# ElevenLabs' published list exactly: any other name is a typo, better refused than guessed.
_ELEVENLABS_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)
_FORMATS: dict[str, OutputFormat] = dict(
    [
        *(_named(fmt) for fmt in OPENAI_FORMATS),
        *(_named(AudioFormat.PCM, rate) for rate in _ELEVENLABS_RATES),
        *(_named(AudioFormat.WAV, rate) for rate in _ELEVENLABS_RATES),
        _named(AudioFormat.ULAW, 8000),
        _named(AudioFormat.ALAW, 8000),
        _named(AudioFormat.MP3, 22050, 32),
        _named(AudioFormat.MP3, 24000, 48),
        *(_named(AudioFormat.MP3, 44100, kbps) for kbps in (32, 64, 96, 128, 192)),
        *(_named(AudioFormat.OPUS, 48000, kbps) for kbps in (32, 64, 96, 128, 192)),
    ]
)

FORMAT_NAMES: tuple[str, ...] = tuple(_FORMATS)


def parse_format(name: str | OutputFormat) -> OutputFormat:
    """The format `name` stands for; raises `ValueError` listing the accepted names."""
    if isinstance(name, OutputFormat):
        return name
    try:
        return _FORMATS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown format {name!r}; accepted: {', '.join(FORMAT_NAMES)}") from None
