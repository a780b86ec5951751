"""`AnswerCheck` byte by byte: it decides as soon as a format's signature has come, no sooner
and no later, and tells apart the formats whose frames look alike."""

from __future__ import annotations

from dataclasses import replace

import pytest

from speechgate.audio.formats import parse_format
from speechgate.errors import UpstreamBadResponse
from speechgate.routing.answer_check import AnswerCheck
from speechgate.speech_request import SpeechRequest

WAV_HEAD = b"RIFF\xff\xff\xff\xffWAVEfmt "
MP3_FRAME = b"\xff\xfb\x90\x64"  # MPEG-1 Layer III, 128 kb/s, 44.1 kHz
MP3_MPEG2 = b"\xff\xf3\x34\xc4"  # MPEG-2 Layer III, as speechgate's encoder starts
ADTS = b"\xff\xf1\x58\x40"  # AAC LC, 24 kHz


def check(fmt: str, stream_format: str = "audio") -> AnswerCheck:
    request = SpeechRequest(model="m", voice="v", format=parse_format(fmt), text="Hi.")
    return AnswerCheck(replace(request, stream_format=stream_format), "upstream 'x'")  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("fmt", "head", "needed"),
    [
        ("wav", WAV_HEAD, 12),
        ("mp3", b"ID3\x04\x00", 3),
        ("mp3", MP3_FRAME, 3),
        ("mp3", MP3_MPEG2, 3),
        ("aac", ADTS, 3),
        ("opus", b"OggS\x00\x02", 4),
        ("flac", b"fLaC\x00\x00", 4),
    ],
)
def test_decides_once_the_signature_has_come(fmt: str, head: bytes, needed: int) -> None:
    checking = check(fmt)
    for at, byte in enumerate(head, 1):
        checking.feed(bytes([byte]))
        assert checking.decided is (at >= needed)


@pytest.mark.parametrize(
    ("fmt", "head"),
    [
        ("mp3", ADTS),  # ADTS's sync with layer 0 is no MP3 frame
        ("aac", MP3_FRAME),
        ("aac", b"ID3\x04"),
        ("mp3", b"\xff\xfd\x90\x64"),  # Layer II
        ("mp3", b"\xff\xfb\xf0\x64"),  # bit-rate index 15: invalid
        ("wav", b"RIFF\x00\x00\x00\x00AVI "),
        ("opus", b"fLaC"),
        ("flac", b"<htm"),
    ],
)
def test_a_lookalike_is_refused(fmt: str, head: bytes) -> None:
    with pytest.raises(UpstreamBadResponse, match=f"not {fmt}"):
        check(fmt).feed(head)


def test_refuses_at_the_first_byte_that_cannot_begin_the_format() -> None:
    checking = check("wav")
    checking.feed(b"RI")
    with pytest.raises(UpstreamBadResponse, match="RIx"):
        checking.feed(b"x")


@pytest.mark.parametrize("fmt", ["pcm", "ulaw_8000", "alaw_8000"])
def test_raw_samples_have_no_signature_but_a_type(fmt: str) -> None:
    checking = check(fmt)
    assert checking.decided
    checking.media_type("audio/L16; rate=24000")
    checking.media_type("application/octet-stream")
    for label in ("text/html", "application/json", "text/plain", "audio/mpeg"):
        with pytest.raises(UpstreamBadResponse, match=f"not {fmt}"):
            checking.media_type(label)


@pytest.mark.parametrize(
    ("head", "fits"),
    [
        (b"data: {}\n\n", True),
        (b"event: audio\ndata: x\n\n", True),
        (b": comment\n", True),
        (b"\n\ndata\n", True),
        (b"retry: 5\n", True),
        (b"<!DOCTYPE html>\n", False),
        (b'{"error": {}}', False),
        (b"datum: 1\n", False),
        (b"OggS\x00\x02", False),
    ],
)
def test_sse_framing(head: bytes, fits: bool) -> None:
    checking = check("mp3", "sse")
    checking.media_type("text/event-stream")
    if fits:
        checking.feed(head)
        assert checking.decided
    else:
        with pytest.raises(UpstreamBadResponse, match="not server-sent events"):
            checking.feed(head)
            checking.end()


def test_sse_needs_its_content_type() -> None:
    with pytest.raises(UpstreamBadResponse, match="'audio/mpeg'"):
        check("mp3", "sse").media_type("audio/mpeg")
