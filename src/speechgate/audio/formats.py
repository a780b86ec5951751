"""The output formats a client may ask for: OpenAI's `response_format` values.

Each format knows its HTTP content type and the output sample rates it can be encoded at, so a
request can be validated (and answered with a 400) before any audio is produced.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

# Every format is kept within 8-48 kHz: 8 kHz (telephone speech) is the lowest rate all the
# codecs share, and no engine produces more than 48 kHz, so higher rates would only add bytes.
_ANY_RATE = range(8000, 48000 + 1)


class AudioFormat(StrEnum):
    """An audio encoding of a response body, named as in OpenAI's `response_format`."""

    MP3 = "mp3"
    OPUS = "opus"
    AAC = "aac"
    FLAC = "flac"
    WAV = "wav"
    PCM = "pcm"

    @property
    def content_type(self) -> str:
        """The `Content-Type` of a response body in this format."""
        return _CONTENT_TYPES[self]

    @property
    def sample_rates(self) -> Sequence[int]:
        """The output sample rates this format can be encoded at, in Hz.

        A `range` means any integer rate in it, a tuple only the rates listed.
        """
        return _SAMPLE_RATES[self]

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


_CONTENT_TYPES: dict[AudioFormat, str] = {
    AudioFormat.MP3: "audio/mpeg",
    # Opus is always sent in an Ogg container, as OpenAI does, hence not "audio/opus".
    AudioFormat.OPUS: "audio/ogg",
    AudioFormat.AAC: "audio/aac",
    AudioFormat.FLAC: "audio/flac",
    AudioFormat.WAV: "audio/wav",
    AudioFormat.PCM: "audio/pcm",
}

_SAMPLE_RATES: dict[AudioFormat, Sequence[int]] = {
    # MPEG-2.5, MPEG-2 and MPEG-1 Layer III rates.
    AudioFormat.MP3: (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
    # Opus itself only runs at these rates.
    AudioFormat.OPUS: (8000, 12000, 16000, 24000, 48000),
    # The rates of the AAC sampling-frequency index table, within 8-48 kHz.
    AudioFormat.AAC: (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000),
    AudioFormat.FLAC: _ANY_RATE,
    AudioFormat.WAV: _ANY_RATE,
    AudioFormat.PCM: _ANY_RATE,
}
