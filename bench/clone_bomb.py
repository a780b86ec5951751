"""Cloning bombs against a real gateway: its peak memory and answer time for each.

    PYTHONPATH=src:. .venv/bin/python bench/clone_bomb.py

Starts `speechgate serve` as a child process (pocket-tts, the tiny random-weight model of
tests/helpers/pocket.py, one worker), then sends each attempt and reads the gateway process's
peak resident memory (VmHWM, reset through /proc/<pid>/clear_refs before each) against its
resident memory when idle. Workers are other processes and are not counted: the bombs are
decoded in the gateway. Linux only.
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
from tests.helpers.audio import flac_bomb, piper_speech, wav_file
from tests.helpers.pocket import build_tiny_model

from speechgate.audio.pcm import PcmChunk
from speechgate.bench import child


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _upload(url: str, name: str, data: bytes) -> httpx.Response:
    files = {"audio_sample": ("sample", data, "application/octet-stream")}
    return httpx.post(f"{url}/v1/audio/voices", data={"name": name}, files=files, timeout=300)


def _reference(url: str, data: bytes) -> httpx.Response:
    body = {
        "model": "pocket",
        "input": "Hello world.",
        "voice": "x",
        "response_format": "pcm",
        "reference_audio": base64.b64encode(data).decode(),
    }
    return httpx.post(f"{url}/v1/audio/speech", json=body, timeout=300)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="clone-bomb-"))
    model = build_tiny_model(work)
    port = child.free_port()
    env = child.clean_env(
        SPEECHGATE_ENGINES="pocket",
        SPEECHGATE_DEFAULT_ENGINE="pocket",
        SPEECHGATE_POOL__WORKERS="1",
        SPEECHGATE_DATA_DIR=str(work / "data"),
        SPEECHGATE_ENGINE_OPTIONS=json.dumps(
            {"pocket": {"config": str(model / "config.yaml"), "eos_threshold": "1e9"}}
        ),
    )
    command = [sys.executable, "-m", "speechgate.cli", "serve", "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with child.child_server(command, env, f"{url}/readyz", work / "server.log") as pid:
        speech = piper_speech()
        long_speech = wav_file(
            PcmChunk(np.tile(speech.samples, int(200 / speech.duration)), speech.sample_rate)
        )
        one_hz = wav_file(PcmChunk(np.full(14 * 1024 // 2, 8000, np.int16), 1))
        bomb48, bomb8 = flac_bomb(4, 48000), flac_bomb(4, 8000)
        attempts: list[tuple[str, Callable[[], list[httpx.Response]]]] = [
            (
                f"upload 4 h FLAC of DC at 48 kHz ({len(bomb48) // 1024} KiB)",
                lambda: [_upload(url, "b48", bomb48)],
            ),
            (
                f"upload 4 h FLAC of DC at 8 kHz ({len(bomb8) // 1024} KiB)",
                lambda: [_upload(url, "b8", bomb8)],
            ),
            ("reference_audio: the 48 kHz bomb", lambda: [_reference(url, bomb48)]),
            (
                f"upload WAV at 1 Hz ({len(one_hz) // 1024} KiB)",
                lambda: [_upload(url, "1hz", one_hz)],
            ),
            ("4 parallel uploads of the 48 kHz bomb", lambda: _parallel(url, bomb48, 4)),
            (
                f"upload 3.3 min of speech, WAV ({len(long_speech) >> 20} MiB)",
                lambda: [_upload(url, "long", long_speech)],
            ),
        ]
        idle = _kib(pid, "VmRSS")
        print(f"gateway idle: {idle / 1024:.1f} MiB resident")
        print(f"{'attempt':52} {'answers':>16} {'peak above idle':>16} {'time':>8}")
        for label, attempt in attempts:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            idle = _kib(pid, "VmRSS")
            started = time.perf_counter()
            responses = attempt()
            elapsed = time.perf_counter() - started
            peak = _kib(pid, "VmHWM") - idle
            first = responses[0]
            answers = str(first.status_code)
            if first.status_code >= 400:
                answers += " " + first.json()["error"]["code"]
            if len(responses) > 1:
                answers += f" x{len(responses)}"
            print(f"{label:52} {answers:>16} {peak / 1024:13.1f} MiB {elapsed:7.2f}s")


def _parallel(url: str, data: bytes, count: int) -> list[httpx.Response]:
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda n: _upload(url, f"p{n}", data), range(count)))


if __name__ == "__main__":
    main()
