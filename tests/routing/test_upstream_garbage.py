"""An upstream that answers 200 with something other than the audio asked for (an HTML page, a
JSON error, random bytes, another format): the router counts it as the provider's failure and
fails over, and the client never gets it as a 200."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest

from speechgate.audio.encoders import encode_all
from speechgate.audio.formats import parse_format
from speechgate.audio.pcm import PcmChunk
from speechgate.errors import UpstreamBadResponse
from speechgate.routing.config import RoutesConfig
from speechgate.routing.providers import RemoteProvider
from speechgate.routing.router import Router
from speechgate.speech_request import SpeechRequest
from tests.helpers.stub_http import stub_server

pytestmark = pytest.mark.anyio

HTML = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>Log in</body></html>"
JSON_ERROR = json.dumps({"error": {"message": "quota exceeded", "type": "server_error"}}).encode()
NOISE = random.Random(7).randbytes(4096)
SSE = (
    b'data: {"type":"speech.audio.delta","audio":"AAAA"}\n\ndata: {"type":"speech.audio.done"}\n\n'
)
TONE = PcmChunk((np.sin(np.arange(4800) / 5) * 8000).astype(np.int16), 24000)


def encoded(name: str) -> bytes:
    fmt = parse_format(name)
    return encode_all([TONE], fmt.format, fmt.sample_rate or 24000)


@dataclass(frozen=True)
class Reply:
    body: bytes
    content_type: str | None
    pieces: int = 1
    """Chunks the body is sent in (chunked transfer), to split a signature between reads."""
    split_head: int = 0
    """Leading bytes sent one chunk each, before the rest in `pieces`: a signature split at
    every byte without the thousands of reads of a whole body sent byte by byte."""


REPLIES: dict[str, Reply] = {}
"""What the stub upstream answers under each base path (`/bad/v1`, `/good/v1`)."""


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        reply = REPLIES[self.path.split("/")[1]]
        self.send_response(200)
        if reply.content_type is not None:
            self.send_header("Content-Type", reply.content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        head, rest = reply.body[: reply.split_head], reply.body[reply.split_head :]
        size = -(-len(rest) // reply.pieces) or 1
        pieces = [head[at : at + 1] for at in range(len(head))]
        pieces += [rest[at : at + size] for at in range(0, len(rest), size)]
        for piece in pieces:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with stub_server(_Upstream) as url:
        yield url


def router(upstream: str, fallback: bool = True) -> Router:
    routes = RoutesConfig.model_validate(
        {
            "providers": {
                name: {"kind": "remote", "base_url": f"{upstream}/{name}/v1"}
                for name in ("bad", "good")
            },
            "breaker": {"min_requests": 100},
            "routes": {
                "tts-1": {"providers": {"bad": 100}, "fallback": ["good"] if fallback else []}
            },
        }
    )
    return Router(routes, lambda name, config: RemoteProvider(name, config))  # type: ignore[arg-type]


def request(name: str, stream_format: str = "audio") -> SpeechRequest:
    return SpeechRequest(
        model="tts-1",
        voice="alloy",
        format=parse_format(name),
        text="Hello.",
        stream_format=stream_format,  # type: ignore[arg-type]
    )


GARBAGE = [
    # (requested format, stream_format, what the bad upstream answers)
    ("wav", "audio", Reply(HTML, "text/html; charset=utf-8")),
    ("wav", "audio", Reply(JSON_ERROR, "application/json")),
    ("wav", "audio", Reply(NOISE, "audio/wav")),
    ("wav", "audio", Reply(NOISE, "application/octet-stream")),
    ("wav", "audio", Reply(b"", "audio/wav")),
    ("wav", "audio", Reply(encoded("mp3"), "audio/mpeg")),  # another format, honestly labelled
    ("wav", "audio", Reply(encoded("mp3"), "audio/wav")),  # another format, labelled as asked
    ("mp3", "audio", Reply(HTML, "text/html")),
    ("mp3", "audio", Reply(encoded("wav"), "audio/mpeg")),
    ("mp3", "audio", Reply(encoded("aac"), None)),
    ("mp3", "audio", Reply(NOISE, "audio/mpeg")),
    ("opus", "audio", Reply(encoded("flac"), "audio/ogg")),
    ("opus", "audio", Reply(JSON_ERROR, "audio/ogg")),
    ("aac", "audio", Reply(encoded("mp3"), "audio/aac")),
    ("flac", "audio", Reply(encoded("wav"), "audio/flac")),
    ("flac", "audio", Reply(b"fLa", "audio/flac")),  # ends before its signature does
    ("pcm", "audio", Reply(HTML, "text/html")),
    ("pcm", "audio", Reply(JSON_ERROR, "application/json")),
    ("pcm", "audio", Reply(encoded("mp3"), "audio/mpeg")),
    ("mp3", "sse", Reply(encoded("mp3"), "audio/mpeg")),
    ("mp3", "sse", Reply(HTML, "text/event-stream")),
    ("mp3", "sse", Reply(JSON_ERROR, "text/event-stream")),
    ("pcm", "sse", Reply(NOISE, "text/event-stream")),
]


@pytest.mark.parametrize(("fmt", "stream_format", "garbage"), GARBAGE)
async def test_garbage_fails_over_and_counts_against_the_provider(
    upstream: str, fmt: str, stream_format: str, garbage: Reply
) -> None:
    good = SSE if stream_format == "sse" else encoded(fmt)
    REPLIES["bad"] = garbage
    REPLIES["good"] = Reply(good, "text/event-stream" if stream_format == "sse" else None)
    routed = router(upstream)
    try:
        answer = await routed.open(request(fmt, stream_format), "k", "req_1")
        body = b"".join([chunk async for chunk in answer.body])
        assert answer.provider == "good"
        assert body == good
        status = routed.state.providers["bad"].breaker.status()
        assert (status.requests, status.failures) == (1, 1)
    finally:
        await routed.aclose()


async def test_garbage_from_every_provider_is_the_upstream_error(upstream: str) -> None:
    REPLIES["bad"] = Reply(HTML, "text/html")
    routed = router(upstream, fallback=False)
    try:
        with pytest.raises(UpstreamBadResponse) as raised:
            await routed.open(request("wav"), "k", "req_1")
    finally:
        await routed.aclose()
    assert raised.value.status_code == 502
    assert "'text/html'" in raised.value.message and "not wav" in raised.value.message


SPLIT_HEAD = 64
"""Bytes of a body sent one by one: more than any format's signature needs."""


@pytest.mark.parametrize("fmt", ["wav", "mp3", "opus", "aac", "flac", "pcm", "ulaw_8000"])
@pytest.mark.parametrize("content_type", ["own", None, "application/octet-stream"])
async def test_the_format_asked_for_passes_whole_even_split_byte_by_byte(
    upstream: str, fmt: str, content_type: str | None
) -> None:
    audio = encoded(fmt)
    label = parse_format(fmt).content_type if content_type == "own" else content_type
    # Each of the first bytes in a read of its own: the check waits for as many as it needs
    # (a WAV's 12 at most, well within the head split here).
    REPLIES["bad"] = Reply(audio, label, split_head=SPLIT_HEAD)
    routed = router(upstream)
    try:
        answer = await routed.open(request(fmt), "k", "req_1")
        assert answer.provider == "bad"
        assert answer.media_type == parse_format(fmt).content_type
        assert b"".join([chunk async for chunk in answer.body]) == audio
    finally:
        await routed.aclose()


@pytest.mark.parametrize(
    "events",
    [SSE, b"\xef\xbb\xbf" + SSE, b": keep-alive\n\n" + SSE, b"\r\nevent: x\r\n" + SSE],
)
async def test_sse_framing_passes(upstream: str, events: bytes) -> None:
    REPLIES["bad"] = Reply(events, "text/event-stream; charset=utf-8", pieces=len(events))
    routed = router(upstream)
    try:
        answer = await routed.open(replace(request("mp3"), stream_format="sse"), "k", "req_1")
        assert answer.provider == "bad"
        assert b"".join([chunk async for chunk in answer.body]) == events
    finally:
        await routed.aclose()
