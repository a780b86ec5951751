"""The HTTP server's own bounds, on a real server over raw sockets: half-sent request heads
time out and are shed when connections run out, oversized heads are refused, and a shutdown
does not wait for ever on a client that does not read."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from uvicorn.server import ServerState

from speechgate.server import guarded_protocol, server_config
from speechgate.workers.interface import WorkerState
from tests.helpers.audio import decode_audio
from tests.helpers.server import (
    RunningServer,
    free_port,
    running_server,
    sdk_client,
    serve_process,
)
from tests.helpers.settings import make_settings
from tests.helpers.waiting import wait_for
from tests.helpers.wire import connect, parse_response, read_until_closed, wait_until_closed

pytestmark = pytest.mark.slow

MAX_CONNECTIONS = 50
HALF_SENT = 200


@pytest.fixture(scope="module")
def guarded() -> Iterator[RunningServer]:
    """One server with every bound of this module set: each test's traffic stays within the
    bounds that the others set (heads are small and sent at once, readers read)."""
    settings = make_settings(
        engines=["espeak"],
        default_engine="espeak",
        pool={"workers": 1, "slow_reader_timeout": 0.5},
        server={
            "max_connections": MAX_CONNECTIONS,
            "header_timeout": 1.0,
            "max_header_bytes": 4096,
        },
    )
    with running_server(settings) as running:
        yield running


def half_sent(server: RunningServer, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = connect(server.url)
        sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: appl")
        socks.append(sock)
    return socks


@contextlib.contextmanager
def unread_speech(port: int, model: str) -> Iterator[socket.socket]:
    """A long clip asked for on a socket with a tiny receive window (the clip cannot fit in
    the socket buffers), its first bytes read to see the audio is under way, then nothing."""
    with socket.socket() as slow:
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", port))
        speech = {"model": model, "voice": "alloy", "input": "Speak slowly. " * 290}
        content = json.dumps({**speech, "response_format": "pcm"}).encode()
        slow.sendall(
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n"
            b"content-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(content), content)
        )
        assert slow.recv(4096).startswith(b"HTTP/1.1 200")
        yield slow


def test_half_sent_requests_neither_lock_out_a_client_nor_stay(guarded: RunningServer) -> None:
    attackers = half_sent(guarded, HALF_SENT)
    try:
        with sdk_client(guarded) as client:
            speech = client.audio.speech.create(
                model="tts-1", voice="alloy", input="Still served.", response_format="wav"
            )
        assert decode_audio(speech.content, "wav").rms > 0.01
        # The server keeps at most MAX_CONNECTIONS: the oldest half-sent ones went first...
        shed = HALF_SENT - MAX_CONNECTIONS
        assert wait_until_closed(attackers, shed) >= shed
        # ...and the rest are closed once their heads are overdue.
        assert wait_until_closed(attackers, HALF_SENT) == HALF_SENT
    finally:
        for sock in attackers:
            sock.close()


def test_a_connection_that_sends_nothing_is_closed(guarded: RunningServer) -> None:
    with connect(guarded.url) as sock:
        assert read_until_closed(sock) == b""


def test_an_oversized_head_is_431_and_closed(guarded: RunningServer) -> None:
    with connect(guarded.url) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nx-padding: " + b"a" * 8192 + b"\r\n\r\n")
        assert parse_response(read_until_closed(sock)).status == 431
    assert httpx.get(f"{guarded.url}/healthz", timeout=30).status_code == 200


def test_a_client_that_stops_reading_is_dropped_and_its_worker_freed(
    guarded: RunningServer,
) -> None:
    port = int(guarded.url.rsplit(":", 1)[1])
    with unread_speech(port, "espeak") as slow:
        # Nothing more is read: the server drops the connection and frees the worker.
        pool = guarded.runtime.pools["espeak"]
        wait_for(lambda: pool.stats().workers.get(WorkerState.IDLE) == 1, timeout=60)
        # What was in the sockets' buffers still comes, then the end (no socket.timeout): the
        # connection is not left waiting for this reader.
        slow.settimeout(30)
        with contextlib.suppress(ConnectionResetError):
            while slow.recv(65536):
                pass
    # The server serves the next client as ever.
    with sdk_client(guarded) as client:
        speech_bytes = client.audio.speech.create(
            model="espeak", voice="alloy", input="Next.", response_format="wav"
        ).content
    assert decode_audio(speech_bytes, "wav").rms > 0.01


def test_shutdown_cuts_off_a_client_that_does_not_read(tmp_path: Path) -> None:
    env = {"SPEECHGATE_DATA_DIR": str(tmp_path), "SPEECHGATE_SERVER__SHUTDOWN_GRACE": "1"}
    port = free_port()
    with (
        serve_process("--engine", "espeak", "--workers", "1", env=env, port=port) as (_, server),
        unread_speech(port, "tts-1"),
    ):
        server.send_signal(signal.SIGTERM)
        # Without a grace period the server waits for this reader for good.
        # (uvicorn re-raises the signal once it has shut down cleanly.)
        assert server.wait(timeout=60) in (0, -signal.SIGTERM)


def test_a_response_stalled_on_a_reader_is_aborted_after_the_bound() -> None:
    """Unit: the protocol drops a connection whose writes stay paused (a client that reads
    nothing) once the bound passes, and keeps one that resumes in time."""
    protocol_class = guarded_protocol(make_settings(pool={"slow_reader_timeout": 0.05}))

    async def run() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        stalled, resumed = _FakeTransport(), _FakeTransport()
        for transport in (stalled, resumed):
            protocol = protocol_class(
                config=server_config(None, make_settings()),
                server_state=ServerState(),
                app_state={},
            )
            protocol.connection_made(transport)  # type: ignore[arg-type]
            protocol.pause_writing()
            if transport is resumed:
                loop.call_later(0.01, protocol.resume_writing)
        await asyncio.sleep(0.2)
        return stalled.aborted, resumed.aborted

    assert asyncio.run(run()) == (True, False)


class _FakeTransport:
    def __init__(self) -> None:
        self.aborted = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 1) if name in ("peername", "sockname") else default

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.aborted = True

    def set_write_buffer_limits(self, *args: object) -> None:
        pass
