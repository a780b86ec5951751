"""Other servers the bench compares speechgate with: their request, command and readiness.

Each baseline is a `Send` for the load generator (the same texts and closed loop) and the
command that serves it: `piper-http` (piper-tts' Flask server, one non-streamed WAV) and
`pocket-serve` (`pocket-tts serve`, a streamed WAV).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from speechgate.bench.audio import WAV_HEADER_BYTES, wav_audio_seconds
from speechgate.bench.load import LoadConfig, Send
from speechgate.bench.stats import Sample
from speechgate.bench.texts import Text

BaselineName = Literal["piper-http", "pocket-serve"]
BASELINES: tuple[BaselineName, ...] = ("piper-http", "pocket-serve")


async def post_wav(
    client: httpx.AsyncClient, path: str, text: Text, **request: Any
) -> tuple[Sample, float]:
    """`POST path` and read a WAV body to its end, first audio timed past the 44-byte header
    as `load.send` times OpenAI's route."""
    started = time.monotonic()
    ttfa: float | None = None
    parts: list[bytes] = []
    received = 0
    try:
        async with client.stream("POST", path, **request) as response:
            if response.status_code != 200:
                await response.aread()
                return Sample(text.kind, response.status_code, time.monotonic() - started), 0.0
            async for part in response.aiter_raw():
                received += len(part)
                parts.append(part)
                if ttfa is None and received > WAV_HEADER_BYTES:
                    ttfa = time.monotonic() - started
    except httpx.HTTPError as error:
        latency = time.monotonic() - started
        return Sample(text.kind, 0, latency, ttfa, error=type(error).__name__), 0.0
    latency = time.monotonic() - started
    try:
        seconds = wav_audio_seconds(b"".join(parts))
    except ValueError:
        return Sample(text.kind, 200, latency, ttfa, error="NotWav"), 0.0
    return Sample(text.kind, 200, latency, ttfa, seconds), 0.0


async def piper_http_send(
    client: httpx.AsyncClient, config: LoadConfig, text: Text
) -> tuple[Sample, float]:
    return await post_wav(client, "/synthesize", text, json={"text": text.text})


def pocket_serve_sender(upload: bytes | None = None) -> Send:
    """pocket-tts serve's `POST /tts`; with `upload`, the voice as `voice_wav` every request."""

    async def send(
        client: httpx.AsyncClient, config: LoadConfig, text: Text
    ) -> tuple[Sample, float]:
        files = {"voice_wav": ("voice.wav", upload, "audio/wav")} if upload else None
        return await post_wav(client, "/tts", text, data={"text": text.text}, files=files)

    return send


@dataclass(frozen=True)
class Baseline:
    """How to serve and load one baseline: `command` listens on 127.0.0.1:`port` and is ready
    once `ready_path` answers 200."""

    name: str
    command: tuple[str, ...]
    port: int
    ready_path: str
    send: Send
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def piper_http(model: Path, port: int) -> Baseline:
    """piper.http_server on `model`, with its own defaults."""
    command = (
        *(sys.executable, "-m", "piper.http_server"),
        *("--host", "127.0.0.1", "--port", str(port), "--model", str(model)),
    )
    return Baseline("piper.http_server", command, port, "/info", piper_http_send)


def pocket_serve(config: Path, voice: Path, port: int, upload: bool = False) -> Baseline:
    """`pocket-tts serve --config config --default-voice voice`; with `upload`, the voice is
    also sent with every request (how its users clone)."""
    executable = Path(sys.executable).parent / "pocket-tts"
    command = (
        *(str(executable), "serve", "--host", "127.0.0.1", "--port", str(port)),
        *("--config", str(config), "--default-voice", str(voice)),
    )
    sender = pocket_serve_sender(voice.read_bytes() if upload else None)
    name = "pocket-tts serve" + (" (voice_wav per request)" if upload else "")
    # Offline: pocket-tts would otherwise retry the unreachable hub at start-up.
    return Baseline(name, command, port, "/health", sender, {"HF_HUB_OFFLINE": "1"})
