"""Format names: OpenAI's six and ElevenLabs' list, parsed in one place."""

from __future__ import annotations

import pytest

from speechgate.audio.formats import FORMAT_NAMES, AudioFormat, parse_format
from tests.helpers.formats import ELEVENLABS

OPENAI = ["mp3", "opus", "aac", "flac", "wav", "pcm"]


def test_the_accepted_names_are_openais_then_elevenlabs() -> None:
    assert list(FORMAT_NAMES[:6]) == OPENAI
    assert sorted(FORMAT_NAMES[6:]) == sorted(ELEVENLABS)


@pytest.mark.parametrize("name", OPENAI)
def test_openai_names_fix_neither_rate_nor_bit_rate(name: str) -> None:
    fmt = parse_format(name)
    assert (fmt.name, fmt.format, fmt.sample_rate, fmt.bit_rate) == (
        name,
        AudioFormat(name),
        None,
        None,
    )


@pytest.mark.parametrize("name", ELEVENLABS)
def test_elevenlabs_names_fix_the_rate_and_bit_rate_they_spell(name: str) -> None:
    codec, rate, *kbps = name.split("_")
    fmt = parse_format(name)
    assert fmt.name == str(fmt) == name
    assert fmt.format is AudioFormat(codec)
    assert fmt.sample_rate == int(rate)
    assert fmt.bit_rate == (int(kbps[0]) * 1000 if kbps else None)
    assert fmt.content_type == fmt.format.content_type
    fmt.format.check_sample_rate(int(rate))  # every name can be encoded


@pytest.mark.parametrize(
    "name",
    [
        "pcm_12345",  # a rate ElevenLabs does not list
        "mp3_44100_999",  # a bit rate it does not list
        "opus_24000_64",  # Opus names are 48 kHz only
        "mp3_44100",
        "ulaw",  # G.711 only by its full name
        "alaw_16000",
        "PCM_16000",
        "ogg",
        "",
    ],
)
def test_other_names_are_refused_listing_the_accepted_ones(name: str) -> None:
    with pytest.raises(ValueError, match=f"unknown format {name!r}; accepted: mp3, opus") as raised:
        parse_format(name)
    assert "pcm_16000" in str(raised.value) and "ulaw_8000" in str(raised.value)


def test_the_name_fixes_the_output_rate() -> None:
    assert parse_format("pcm_16000").output_rate(requested=None, default=24000) == 16000
    assert parse_format("pcm_16000").output_rate(requested=16000, default=24000) == 16000
    assert parse_format("ulaw_8000").output_rate(requested=None, default=24000) == 8000
    with pytest.raises(ValueError, match="pcm_16000 is 16000 Hz audio; sample_rate 24000"):
        parse_format("pcm_16000").output_rate(requested=24000, default=24000)


def test_openai_names_take_the_requested_rate_or_the_default() -> None:
    assert parse_format("pcm").output_rate(requested=None, default=24000) == 24000
    assert parse_format("pcm").output_rate(requested=11025, default=24000) == 11025
    with pytest.raises(ValueError, match="opus output supports sample rates 8000, 12000"):
        parse_format("opus").output_rate(requested=22050, default=24000)
