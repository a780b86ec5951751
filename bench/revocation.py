"""Revoking a key while its streaming session speaks: how soon is the session closed?

    .venv/bin/python bench/revocation.py --src /path/to/old/src --src src

For each `--src` (a speechgate source tree: two builds side by side), starts `speechgate
serve` from it (keys mode, an admin key, `--engine`, one worker, a throw-away data
directory), makes a key through the admin API, opens `WS /v1/audio/speech/stream` with it and
sends a long text at once. The client reads the audio as a player would, `--pace` times faster
than real time (so the server's backpressure, not the engine's speed, sets how much is sent).
After `--before` seconds of audio it revokes the key through the admin API, and keeps reading
until the server closes the session or `--cap` seconds have passed. Prints, per build: seconds
from the revocation to the close, seconds of audio received after the revocation, and the
error event and close code. Nothing here asserts anything: it reports.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

ADMIN_KEY = "bench-admin-" + "x" * 32
TEXT = " ".join(f"This is sentence number {n} of a long text read aloud." for n in range(400))
RATE = 24000


@dataclass
class Outcome:
    error_after: float | None
    """Seconds from the revocation to the error event (None: none came before the cap)."""
    close_after: float | None
    """Seconds from the revocation to the close (None: still open at the cap)."""
    audio_after: float
    audio_before: float
    error: str | None
    close_code: int | None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve(src: Path, engine: str, data_dir: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(src),
        "SPEECHGATE_ENGINES": engine,
        "SPEECHGATE_DEFAULT_ENGINE": engine,
        "SPEECHGATE_POOL__WORKERS": "1",
        "SPEECHGATE_AUTH__MODE": "keys",
        "SPEECHGATE_AUTH__ADMIN_KEY": ADMIN_KEY,
        "SPEECHGATE_DATA_DIR": str(data_dir),
        "SPEECHGATE_SERVER__PLAYGROUND": "false",
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "speechgate.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server from {src} exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return url, process
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the server from {src} did not start")


def measure(url: str, engine: str, pace: float, before: float, cap: float) -> Outcome:
    admin = httpx.Client(base_url=f"{url}/v1", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    created = admin.post("/admin/keys", json={"name": "bench"}).json()
    ws_url = url.replace("http", "ws") + "/v1/audio/speech/stream"
    audio = 0.0
    revoked_at: float | None = None
    audio_at_revocation = 0.0
    error: str | None = None
    error_at: float | None = None
    code: int | None = None
    closed_at: float | None = None
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {created['key']}"}) as ws:
        update = {"model": engine, "voice": "alloy", "response_format": "pcm"}
        ws.send(json.dumps({"type": "session.update", "session": update}))
        ws.send(json.dumps({"type": "input_text.delta", "delta": TEXT}))
        ws.send(json.dumps({"type": "input_text.done"}))
        started = time.monotonic()
        try:
            while True:
                now = time.monotonic()
                if revoked_at is not None and now - revoked_at > cap:
                    break
                # A player: it takes more audio only once it has played what it holds.
                ahead = audio / pace - (now - started)
                if ahead > 0:
                    time.sleep(ahead)
                message = ws.recv(timeout=cap)
                if isinstance(message, bytes):
                    audio += len(message) / 2 / RATE
                else:
                    event = json.loads(message)
                    if event["type"] == "error":
                        error, error_at = event["error"]["code"], time.monotonic()
                    elif event["type"] == "session.done":
                        break
                if revoked_at is None and audio >= before:
                    audio_at_revocation = audio
                    response = admin.post(f"/admin/keys/{created['id']}/revoke")
                    response.raise_for_status()
                    revoked_at = time.monotonic()
        except ConnectionClosed as closed:
            closed_at = time.monotonic()
            code = closed.rcvd.code if closed.rcvd is not None else None
        except TimeoutError:
            pass
    admin.close()
    return Outcome(
        None if error_at is None or revoked_at is None else error_at - revoked_at,
        None if closed_at is None or revoked_at is None else closed_at - revoked_at,
        audio - audio_at_revocation,
        audio_at_revocation,
        error,
        code,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", action="append", type=Path, required=True)
    parser.add_argument("--engine", default="fake")
    parser.add_argument("--pace", type=float, default=4.0, help="times real time the client reads")
    parser.add_argument("--before", type=float, default=5.0, help="audio seconds before revoking")
    parser.add_argument("--cap", type=float, default=30.0, help="wall seconds to wait after")
    args = parser.parse_args()
    header = f"{'build':<30} {'error after':>11} {'closed after':>12} {'audio after':>11}"
    print(f"{header}  error / code")
    for src in args.src:
        with tempfile.TemporaryDirectory(prefix="speechgate-revocation-") as data_dir:
            url, process = serve(src.resolve(), args.engine, Path(data_dir))
            try:
                outcome = measure(url, args.engine, args.pace, args.before, args.cap)
            finally:
                process.terminate()
                process.wait(timeout=30)
        error, closed = (
            f"{after:.2f} s" if after is not None else f"> {args.cap:g} s"
            for after in (outcome.error_after, outcome.close_after)
        )
        print(
            f"{src!s:<30} {error:>11} {closed:>12} {outcome.audio_after:>9.1f} s  "
            f"{outcome.error} / {outcome.close_code}"
        )


if __name__ == "__main__":
    main()
