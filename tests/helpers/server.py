"""A real speechgate server on loopback, in a background thread of the test process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import openai
import uvicorn
from fastapi import FastAPI

from speechgate.api.app import create_app
from speechgate.api.state import AppState, started
from speechgate.runtime import Runtime
from speechgate.server import server_config
from speechgate.settings import Settings
from tests.helpers.waiting import wait_for

_START_TIMEOUT = 60.0
SPEECHGATE = [sys.executable, "-m", "speechgate.cli"]
"""The `speechgate` command, in this interpreter."""


class StartedApp:
    """What an app whose lifespan runs (served on loopback or in-process) has started."""

    app: FastAPI

    @property
    def state(self) -> AppState:
        state = started(self.app)
        assert state is not None, "the app's lifespan has not started it"
        return state

    @property
    def runtime(self) -> Runtime:
        return self.state.runtime


@dataclass
class RunningServer(StartedApp):
    url: str
    app: FastAPI


def free_port() -> int:
    """A loopback port nothing listens on now (for a server to restart on the same one)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses connections until the block ends: bound but not listening,
    so no other process (another test process's server) can take it meanwhile, as it could a
    port that `free_port` found free."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        yield port


@contextmanager
def serving(
    app: FastAPI,
    name: str,
    lifespan: str = "on",
    port: int = 0,
    settings: Settings | None = None,
) -> Iterator[str]:
    """Serve `app` with uvicorn on loopback in a thread (on a free port unless `port` says
    which, e.g. to restart a server where it was); yields its base URL. With `settings`,
    uvicorn is set up as `speechgate serve` sets it up (timeouts, bounds, connection cap)."""
    options: dict[str, object] = {
        "host": "127.0.0.1",
        "port": port,
        "log_level": "warning",
        "lifespan": lifespan,
    }
    config = (
        server_config(app, settings, **options)
        if settings is not None
        else uvicorn.Config(app, **options)  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + _START_TIMEOUT
    # Polls uvicorn's own flag: start-up may spawn engine processes, which takes seconds.
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@contextmanager
def running_server(settings: Settings, port: int = 0) -> Iterator[RunningServer]:
    """Serve `create_app(settings)` on loopback (a free port by default) until the block ends."""
    app = create_app(settings)
    with serving(app, "speechgate-test-server", port=port, settings=settings) as url:
        yield RunningServer(url, app)


def sdk_client(server: RunningServer | str, key: str = "unused") -> openai.OpenAI:
    """The official SDK pointed at `server` (or its URL) with `key`, without retries (a retry
    would hide a failure)."""
    url = server if isinstance(server, str) else server.url
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


@contextmanager
def serve_process(
    *args: str, env: Mapping[str, str], port: int | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`speechgate serve ARGS` in a process of its own, as users run it, with `env` added to
    this process's environment (read at its start, as a user's would be), on `port` (a free
    one by default); yields its URL, once ready, and the process, its stdout and stderr piped
    together (read them with `communicate`; nothing drains them meanwhile, so a test that
    makes the server log more than a pipe holds would stall it). Terminated when the block
    ends (killed if it has not stopped 30 s later)."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    with subprocess.Popen(
        [*SPEECHGATE, "serve", "--port", str(port), *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as server:

        def ready() -> bool:
            assert server.poll() is None, server.communicate()[0]
            try:
                return httpx.get(f"{url}/readyz").status_code == 200
            except httpx.TransportError:
                return False

        try:
            wait_for(ready, timeout=_START_TIMEOUT)
            yield url, server
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a server that does not stop: the test says why
                server.kill()
