"""Servers as child processes, for the bench scripts that compare them side by side."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import httpx


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPEECHGATE_")}
    return env | extra


@contextlib.contextmanager
def child_server(
    command: Sequence[str],
    env: dict[str, str],
    ready: str | Callable[[], bool],
    log: Path,
    timeout: float = 300,
    cpus: Sequence[int] | None = None,
) -> Iterator[int]:
    """Run `command` in its own process group until the block ends; yields its pid once
    `ready` (a URL that answers 200, or a check) holds. With `cpus`, on those cores only."""
    is_ready = ready if callable(ready) else lambda: _answers(ready)
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        if cpus:
            # Before it has loaded anything, so its threads and children all inherit it.
            os.sched_setaffinity(process.pid, cpus)
        deadline = time.monotonic() + timeout
        while not is_ready():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{command[0]} did not start:\n{tail}")
            time.sleep(0.25)
        yield process.pid
    finally:
        _stop_group(process)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
            if sig is signal.SIGTERM:  # the leader is gone; its workers may linger
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            return
