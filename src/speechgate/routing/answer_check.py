"""Whether an upstream's 200 is the audio that was asked for, judged before any of it reaches
the client: its `Content-Type`, and the first bytes of its body (a container's magic, a codec's
frame sync, SSE framing).

An upstream that answers 200 with an HTML login page, a JSON error, random bytes or another
format than asked has failed exactly as one that answered 502: `AnswerCheck` raises
`UpstreamBadResponse`, so that the router counts it against the provider and fails over. Only
as many bytes as a format's signature needs are looked at (and held back until then): the
check adds no wait beyond them, and says nothing about the rest of the body.
"""

from __future__ import annotations

from collections.abc import Callable

from speechgate.audio.formats import AudioFormat
from speechgate.errors import UpstreamBadResponse
from speechgate.speech_request import SpeechRequest

SSE_CONTENT_TYPE = "text/event-stream"
# Types that name a binary body without saying which: the first bytes decide.
_GENERIC_TYPES = frozenset({"application/octet-stream", "binary/octet-stream"})
# The types upstreams send for each encoding (RFC types, and the common unregistered ones). A
# known type of another encoding is a mismatch; an unknown `audio/*` type is left to the bytes.
_KNOWN_TYPES: dict[str, AudioFormat | None] = {
    **dict.fromkeys(
        ("audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg", "audio/x-mp3", "audio/mpa"),
        AudioFormat.MP3,
    ),
    **dict.fromkeys(
        ("audio/ogg", "audio/opus", "application/ogg", "audio/x-opus", "audio/x-ogg"),
        AudioFormat.OPUS,
    ),
    **dict.fromkeys(
        ("audio/aac", "audio/aacp", "audio/x-aac", "audio/x-hx-aac-adts"), AudioFormat.AAC
    ),
    **dict.fromkeys(("audio/flac", "audio/x-flac"), AudioFormat.FLAC),
    **dict.fromkeys(("audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"), AudioFormat.WAV),
    **dict.fromkeys(("audio/basic", "audio/pcmu"), AudioFormat.ULAW),
    **dict.fromkeys(("audio/x-alaw-basic", "audio/pcma"), AudioFormat.ALAW),
    # Containers no requested format is sent in.
    **dict.fromkeys(("audio/webm", "audio/mp4", "audio/x-m4a", "video/webm", "video/mp4"), None),
}
# Raw samples have no signature: any audio type but a known one of a coded format fits them.
_RAW = (AudioFormat.PCM, AudioFormat.ULAW, AudioFormat.ALAW)
# SSE's field names (and the empty one of a comment line, `:...`).
_SSE_FIELDS = frozenset({"data", "event", "id", "retry", ""})
# A field name longer than the longest of them cannot be one: no need to wait for its end.
_SSE_FIELD_MAX = len("retry")
_UTF8_BOM = b"\xef\xbb\xbf"


class AnswerCheck:
    """The check of one answer: `media_type` once its headers are in, then `feed` each piece
    of the body until `decided`, then `end` if the body ended first. Each raises
    UpstreamBadResponse on a mismatch, naming `what` (the upstream) in its message."""

    def __init__(self, request: SpeechRequest, what: str) -> None:
        self._sse = request.stream_format == "sse"
        self._format = request.format.format
        self._name = "server-sent events" if self._sse else request.format.name
        self._what = what
        self._head = b""
        self.decided = not self._sse and self._format in _RAW
        """True once the body's start is known to fit (at once for raw samples)."""

    def media_type(self, content_type: str | None) -> None:
        """Check the answer's `Content-Type` (None: the upstream sent none, left to the bytes)."""
        if content_type is None:
            return
        kind = content_type.split(";", 1)[0].strip().lower()
        if self._sse:
            fits = kind == SSE_CONTENT_TYPE
        elif kind in _GENERIC_TYPES or not kind:
            fits = True
        elif kind in _KNOWN_TYPES:
            fits = _KNOWN_TYPES[kind] is self._format or (
                # Raw PCM is often labelled with the coded type of no one in particular.
                self._format is AudioFormat.PCM and _KNOWN_TYPES[kind] is None
            )
        else:
            fits = kind.startswith("audio/")
        if not fits:
            self._fail(f"with Content-Type {content_type[:100]!r}")

    def feed(self, data: bytes) -> None:
        """The next bytes of the body, until `decided`."""
        if self.decided or not data:
            return
        self._head += data
        verdict = _sse_start(self._head) if self._sse else _audio_start(self._format, self._head)
        if verdict is None:
            return
        if not verdict:
            self._fail(f"starting {self._head[:16]!r}")
        self.decided = True
        self._head = b""

    def end(self) -> None:
        """The body ended before `decided`: too short to be the format."""
        if self.decided:
            return
        if not self._head:
            self._fail("with an empty body")
        self._fail(f"of only {len(self._head)} bytes, {self._head[:16]!r}")

    def _fail(self, how: str) -> None:
        raise UpstreamBadResponse(f"The {self._what} answered {how}, which is not {self._name}.")


def _audio_start(fmt: AudioFormat, head: bytes) -> bool | None:
    """Whether `head` begins `fmt`; None until enough bytes have come to tell."""
    if fmt is AudioFormat.WAV:
        if len(head) < 12:
            return None if _could_be(head, b"RIFF", b"RF64") else False
        return head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE"
    if fmt is AudioFormat.OPUS:
        return _magic(head, b"OggS")
    if fmt is AudioFormat.FLAC:
        return _magic(head, b"fLaC")
    if fmt is AudioFormat.MP3:
        if _could_be(head, b"ID3") and len(head) < 3:
            return None
        return True if head.startswith(b"ID3") else _frame_sync(head, _mp3_frame)
    if fmt is AudioFormat.AAC:
        return _frame_sync(head, _adts_frame)
    return True


def _could_be(head: bytes, *signatures: bytes) -> bool:
    return any(signature.startswith(head[: len(signature)]) for signature in signatures)


def _magic(head: bytes, signature: bytes) -> bool | None:
    if len(head) < len(signature):
        return None if signature.startswith(head) else False
    return head.startswith(signature)


def _frame_sync(head: bytes, valid: Callable[[int, int], bool]) -> bool | None:
    """A codec's frame header: 0xFF, then two bytes `valid` judges."""
    if head[0] != 0xFF:
        return False
    if len(head) < 3:
        return None
    return valid(head[1], head[2])


def _mp3_frame(second: int, third: int) -> bool:
    """An MPEG audio Layer III frame header: 11 sync bits, a version other than the reserved
    one, layer III, then a bit-rate index and a sample-rate index that are not invalid."""
    version, layer = (second >> 3) & 0b11, (second >> 1) & 0b11
    bit_rate, sample_rate = third >> 4, (third >> 2) & 0b11
    return (
        second & 0xE0 == 0xE0
        and version != 0b01
        and layer == 0b01
        and bit_rate != 0b1111
        and sample_rate != 0b11
    )


def _adts_frame(second: int, third: int) -> bool:
    """An ADTS frame header: 12 sync bits, layer 0, and a sampling-frequency index in the
    table (0-12)."""
    return second & 0xF6 == 0xF0 and (third >> 2) & 0b1111 <= 12


def _sse_start(head: bytes) -> bool | None:
    """Whether `head` begins a server-sent event stream: blank lines, then a line that is a
    comment or one of SSE's fields. None until that line's field name has come."""
    text = head.removeprefix(_UTF8_BOM).lstrip(b"\r\n")
    if not text:
        return None
    name, found, _ = text.partition(b":")
    if not found:
        line = text.split(b"\n", 1)[0].split(b"\r", 1)[0]
        if len(line) < len(text):  # a whole line without a colon: a field with no value
            return line in (b"data", b"event", b"id", b"retry")
        return None if len(text) <= _SSE_FIELD_MAX else False
    return name.decode("latin-1") in _SSE_FIELDS
