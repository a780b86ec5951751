"""A throw-away Redis server for the tests, started by the tests themselves.

`SPEECHGATE_TEST_REDIS_URL` (a server the tests may write to) is used instead when it is
set. Otherwise Debian's `redis-server` is started on a free loopback port, in a temporary
directory and without persistence. `make test` installs it (scripts/system-packages.sh).
Tests keep apart by their keys' ids (random), not by flushing the server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.server import free_port

_START_TIMEOUT = 30.0


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_instance() -> Iterator[str]:
    """Yields the URL of a running Redis server."""
    given = os.environ.get("SPEECHGATE_TEST_REDIS_URL")
    if given:
        yield given
        return
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError(
            "Redis is not installed (no redis-server): apt-get install redis-server, or set "
            "SPEECHGATE_TEST_REDIS_URL"
        )
    root = Path(tempfile.mkdtemp(prefix="speechgate-redis-"))
    port = free_port()
    # Started directly, not daemonized, so that it is ours to stop; no RDB or AOF files.
    process = subprocess.Popen(
        [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(root),
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            str(root / "log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # redis-server has no readiness signal but answering: poll until it does.
        deadline = time.monotonic() + _START_TIMEOUT
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                log = (root / "log").read_text() if (root / "log").exists() else ""
                raise RuntimeError(f"redis-server did not start:\n{log}")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)
