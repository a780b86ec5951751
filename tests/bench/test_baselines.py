"""The baseline adapters: their requests and timing, then pocket-tts serve's against its real
server (piper's own http_server is loaded for real as the bench's baseline in
tests/bench/test_load.py: one start of it proves both)."""

from __future__ import annotations

import asyncio
import http.server
import io
import json
import os
import wave
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from speechgate.bench import TEXTS, child
from speechgate.bench.baselines import (
    Baseline,
    piper_http_send,
    pocket_serve,
    pocket_serve_sender,
    post_wav,
)
from speechgate.bench.load import LoadConfig, Send, run_load
from speechgate.bench.stats import Sample
from tests.helpers.stub_http import stub_server

CONFIG = LoadConfig(url="http://baseline")
TEXT = TEXTS[0]


def whole_wav(seconds: float, rate: int = 22050) -> bytes:
    """A WAV as Python's `wave` writes it, sizes filled in: what piper.http_server returns."""
    with io.BytesIO() as buffer:
        with wave.open(buffer, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(rate)
            wav.writeframes(bytes(2 * int(seconds * rate)))
        return buffer.getvalue()


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    content: bytes


class Recorder:
    """A real HTTP/1.1 server on loopback that keeps each request and answers it with `parts`
    (flushed one by one, the body's end marked by closing the connection) and `status`."""

    def __init__(self, parts: Sequence[bytes] | bytes, status: int = 200) -> None:
        self.requests: list[Received] = []
        self.parts = [parts] if isinstance(parts, bytes) else list(parts)
        self.status = status

    def send(self, send: Send) -> tuple[Sample, float]:
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["content-length"])
                headers = {key.lower(): value for key, value in self.headers.items()}
                content = self.rfile.read(length)
                recorder.requests.append(Received("POST", self.path, headers, content))
                self.send_response(recorder.status)
                self.send_header("connection", "close")
                self.end_headers()
                for part in recorder.parts:
                    self.wfile.write(part)
                    self.wfile.flush()

            def log_message(self, format: str, *args: object) -> None:
                pass

        with stub_server(Handler) as url:

            async def go() -> tuple[Sample, float]:
                async with httpx.AsyncClient(base_url=url) as client:
                    return await send(client, CONFIG, TEXT)

            return asyncio.run(go())


def test_piper_http_posts_the_text_as_json_and_counts_the_whole_wav() -> None:
    recorder = Recorder(whole_wav(1.5))
    sample, retry = recorder.send(piper_http_send)
    (request,) = recorder.requests
    assert (request.method, request.path) == ("POST", "/synthesize")
    assert json.loads(request.content) == {"text": TEXT.text}
    assert sample.ok and retry == 0.0
    assert sample.audio_seconds == pytest.approx(1.5, abs=1e-4)
    # Sent whole: first audio is its first body byte, so it comes no later than the last.
    assert 0 < sample.ttfa <= sample.latency


def test_pocket_serve_posts_a_form_with_the_voice_only_when_uploading() -> None:
    preloaded, upload = Recorder(whole_wav(1.0, 24000)), Recorder(whole_wav(1.0, 24000))
    preloaded.send(pocket_serve_sender())
    upload.send(pocket_serve_sender(b"RIFF-voice"))
    for recorder in (preloaded, upload):
        (request,) = recorder.requests
        assert (request.method, request.path) == ("POST", "/tts")
    assert preloaded.requests[0].headers["content-type"] == "application/x-www-form-urlencoded"
    assert preloaded.requests[0].content.decode() == str(httpx.QueryParams(text=TEXT.text))
    multipart = upload.requests[0].content
    assert b'name="voice_wav"' in multipart and b"RIFF-voice" in multipart
    assert b'name="text"' in multipart and TEXT.text.encode() in multipart


def test_first_audio_waits_past_the_header_of_a_streamed_wav() -> None:
    body = whole_wav(0.5, 24000)

    # The header alone is no audio yet.
    sample, _ = Recorder([body[:44], body[44:]]).send(pocket_serve_sender())
    assert sample.ok and sample.ttfa is not None
    assert sample.audio_seconds == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [(b'{"error": "x"}', 500, (500, None)), (b"<html>", 200, (200, "NotWav"))],
)
def test_a_failure_is_a_failed_sample_not_an_exception(
    body: bytes, status: int, expected: tuple[int, str | None]
) -> None:
    sample, retry = Recorder(body, status).send(piper_http_send)
    assert (sample.status, sample.error) == expected
    assert not sample.ok and retry == 0.0


def test_a_refused_connection_is_a_failed_sample() -> None:
    async def go() -> tuple[Sample, float]:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{child.free_port()}") as client:
            return await post_wav(client, "/synthesize", TEXT, json={"text": TEXT.text})

    sample, _ = asyncio.run(go())
    assert (sample.status, sample.error) == (0, "ConnectError")


def load_real(baseline: Baseline, tmp_path: Path, *others: Baseline) -> None:
    """Serve `baseline` as the bench does, load it at two levels, check audio and memory; then
    the same for each of `others`, baselines that differ from it only in how they send (one
    server start for all). One short text and no warm-up: that the bench drives the real
    process is the subject, and each request is frames of the model computed one by one."""
    assert all(other.command == baseline.command for other in others)
    ready = baseline.url + baseline.ready_path
    env = child.clean_env(**baseline.env)
    with child.child_server(baseline.command, env, ready, tmp_path / "log", 120) as pid:
        config = LoadConfig(
            url=baseline.url,
            levels=(1, 2),
            requests_per_level=2,
            duration=None,
            texts=TEXTS[:1],
            warmup=0,
            server_pid=pid,
        )
        runs = [
            run
            for sender in (baseline, *others)
            for run in asyncio.run(run_load(config, send=sender.send))
        ]
    assert len(runs) == 2 * (1 + len(others))
    for run in runs:
        assert run.stats.completed == 2, run.stats.errors
        assert all(s.audio_seconds > 0.5 and s.ttfa is not None for s in run.samples)
        assert run.rss_peak is not None and run.rss_end is not None
        assert run.rss_peak >= run.rss_end > 10_000_000  # a loaded model, not an empty tree
    with pytest.raises(ProcessLookupError):  # stopped at the end, its whole group
        os.killpg(pid, 0)


@pytest.mark.slow
def test_pocket_tts_serve_for_real(tmp_path: Path) -> None:
    """Its default voice, then the voice uploaded with every request, on one server."""
    pytest.importorskip("pocket_tts")
    from tests.helpers.pocket import build_tiny_model

    model = build_tiny_model(tmp_path)
    port = child.free_port()
    default, uploaded = (
        pocket_serve(model / "config.yaml", model / "low.wav", port, upload=upload)
        for upload in (False, True)
    )
    load_real(default, tmp_path, uploaded)
