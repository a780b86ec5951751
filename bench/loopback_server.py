"""`speechgate serve` in a process of its own on loopback, for the bench scripts that need a
real server (imported by them: bench/ is on the path of a script run from it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import httpx


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def speechgate_serve(env: Mapping[str, str], timeout: float = 180.0) -> Iterator[str]:
    """Start `speechgate serve` with `env` added to this environment, yield its base URL once
    `/readyz` answers 200, stop it when the block ends. Its log goes to a temporary file,
    printed if it fails to start."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "speechgate.cli", "serve", "--port", str(port)]
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(
            command, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"speechgate serve did not start:\n{log.read()[-4000:]}")
                try:
                    if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.5)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
