"""What a client gets when a routed upstream answers 200 with something other than the audio
asked for.

    PYTHONPATH=src .venv/bin/python bench/upstream_garbage.py

A stub upstream on loopback answers each kind of garbage (an HTML page, a JSON error, random
bytes, an empty body, another format) under one path and good audio under another. The router
(`speechgate.routing`, in process, with remote providers) is asked for each kind twice: with
the good upstream as fallback, and alone. Prints, per kind, who served the request with
fallback, and without it what the client got: a 200 (and its content type) or the error.
Run it with another build's sources first on PYTHONPATH to compare. It reports; it asserts
nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from speechgate.audio.encoders import encode_all
from speechgate.audio.formats import AudioFormat, parse_format
from speechgate.audio.pcm import PcmChunk
from speechgate.errors import SpeechgateError
from speechgate.routing.config import ProviderConfig, RemoteProviderConfig, RoutesConfig
from speechgate.routing.providers import RemoteProvider
from speechgate.routing.router import Router
from speechgate.speech_request import SpeechRequest

TONE = PcmChunk((np.sin(np.arange(4800) / 5) * 8000).astype(np.int16), 24000)
HTML = b"<!DOCTYPE html><html><body>Please sign in</body></html>"
JSON_ERROR = json.dumps({"error": {"message": "quota exceeded"}}).encode()
NOISE = random.Random(7).randbytes(4096)


def encoded(fmt: AudioFormat) -> bytes:
    return encode_all([TONE], fmt, 24000)


# (label, requested format, stream_format, content type, body)
KINDS = [
    ("HTML page", "wav", "audio", "text/html", HTML),
    ("JSON error", "wav", "audio", "application/json", JSON_ERROR),
    ("random bytes labelled audio/wav", "wav", "audio", "audio/wav", NOISE),
    ("empty body", "wav", "audio", "audio/wav", b""),
    ("mp3 for wav", "wav", "audio", "audio/mpeg", encoded(AudioFormat.MP3)),
    ("mp3 labelled audio/wav", "wav", "audio", "audio/wav", encoded(AudioFormat.MP3)),
    ("wav for mp3", "mp3", "audio", "audio/mpeg", encoded(AudioFormat.WAV)),
    ("flac for opus", "opus", "audio", "audio/ogg", encoded(AudioFormat.FLAC)),
    ("HTML for pcm", "pcm", "audio", "text/html", HTML),
    ("audio for sse", "mp3", "sse", "audio/mpeg", encoded(AudioFormat.MP3)),
    ("HTML as event-stream", "mp3", "sse", "text/event-stream", HTML),
]
_answer: dict[str, tuple[str, bytes]] = {}


class _Upstream(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        content_type, body = _answer[self.path.split("/")[1]]
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def router(url: str, fallback: bool) -> Router:
    routes = RoutesConfig.model_validate(
        {
            "providers": {
                name: {"kind": "remote", "base_url": f"{url}/{name}/v1"} for name in ("bad", "good")
            },
            "routes": {
                "tts-1": {"providers": {"bad": 100}, "fallback": ["good"] if fallback else []}
            },
        }
    )

    def make(name: str, config: ProviderConfig) -> RemoteProvider:
        assert isinstance(config, RemoteProviderConfig)
        return RemoteProvider(name, config)

    return Router(routes, make)  # type: ignore[arg-type]


async def ask(url: str, request: SpeechRequest, fallback: bool) -> str:
    routed = router(url, fallback)
    try:
        answer = await routed.open(request, "k", "req")
        body = b"".join([chunk async for chunk in answer.body])
        return f"200 from {answer.provider}, {answer.media_type}, {len(body)} bytes"
    except SpeechgateError as error:
        return f"{error.status_code} {error.code}"
    finally:
        await routed.aclose()


async def main() -> None:
    logging.disable(logging.WARNING)  # each failover logs its reason; the table says it
    print(f"{'garbage':<32} {'with fallback':<40} alone")
    with upstream() as url:
        for label, name, stream_format, content_type, body in KINDS:
            fmt = parse_format(name)
            good = (
                b'data: {"type":"speech.audio.done"}\n\n'
                if stream_format == "sse"
                else encoded(fmt.format)
            )
            _answer["good"] = (
                "text/event-stream" if stream_format == "sse" else fmt.content_type,
                good,
            )
            _answer["bad"] = (content_type, body)
            request = SpeechRequest(
                model="tts-1",
                voice="alloy",
                format=fmt,
                text="Hello.",
                stream_format=stream_format,  # type: ignore[arg-type]
            )
            with_fallback = await ask(url, request, fallback=True)
            alone = await ask(url, request, fallback=False)
            print(f"{label:<32} {with_fallback:<40} {alone}")


if __name__ == "__main__":
    asyncio.run(main())
