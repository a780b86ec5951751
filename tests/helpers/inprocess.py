"""The app in the test's own process: its lifespan run, requests through Starlette's TestClient
(an `httpx2.Client`, as the openai SDK's, whose transport calls the ASGI app), no socket and no
uvicorn.

For tests whose subject is the API's behaviour (the contract, errors, limits, formats, the
routes of each front end); a test of what uvicorn does (timeouts, body limits, connection
caps) or of a real client over a real socket keeps `tests.helpers.server.running_server`.
The engine workers are real processes all the same: the lifespan starts the pool.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import httpx2
import openai
from fastapi import FastAPI
from starlette.testclient import TestClient, WebSocketTestSession
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close
from websockets.sync.client import ClientConnection, connect

from speechgate.api.app import create_app
from speechgate.settings import Settings
from tests.helpers.server import RunningServer, StartedApp, sdk_client

BASE_URL = "http://testserver"


class InProcessWebSocket:
    """A WebSocket session on the app, with the part of `websockets`' sync client that the
    tests use (`send`, `recv` with a timeout, `close_code`), so that a helper such as
    `tests.helpers.streaming.session_events` reads either."""

    def __init__(self, session: WebSocketTestSession) -> None:
        self._session = session
        self.close_code: int | None = None

    def send(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            self._session.send_bytes(message)
        else:
            self._session.send_text(message)

    def recv(self, timeout: float = 30) -> str | bytes:
        """The next message; `ConnectionClosed` once the app has closed the session."""
        if self.close_code is not None:
            raise ConnectionClosed(Close(self.close_code, ""), None)
        message = self._session.portal.call(self._receive_within, timeout)
        if message["type"] == "websocket.close":
            self.close_code = message.get("code", 1000)
            raise ConnectionClosed(Close(self.close_code, message.get("reason") or ""), None)
        text: str | None = message.get("text")
        return text if text is not None else message["bytes"]

    async def _receive_within(self, seconds: float) -> dict[str, Any]:
        # TestClient's own receive waits for ever; a session that stalls fails the test.
        with anyio.fail_after(seconds):
            message: dict[str, Any] = await self._session._send_rx.receive()
            return message


@dataclass
class InProcessApp(StartedApp):
    """`create_app(settings)` with its lifespan running; `http` sends it requests (paths
    relative to `url`)."""

    app: FastAPI
    http: TestClient
    url: str = BASE_URL

    def client(self, path: str = "", headers: dict[str, str] | None = None) -> httpx2.Client:
        """A client of the app at `url` + `path`, sending `headers`: its own `httpx2.Client`
        on the TestClient's transport, so that closing it leaves the app running."""
        return httpx2.Client(
            transport=self.http._transport, base_url=self.url + path, headers=headers
        )

    def sdk(self, key: str = "unused") -> openai.OpenAI:
        """The official SDK on the app with `key`, without retries (a retry would hide a
        failure)."""
        return openai.OpenAI(
            base_url=f"{self.url}/v1", api_key=key, max_retries=0, http_client=self.client()
        )

    @contextmanager
    def websocket(
        self, path: str, headers: dict[str, str] | None = None
    ) -> Iterator[InProcessWebSocket]:
        """A WebSocket session on `path`; closed (if the app has not) when the block ends."""
        with self.http.websocket_connect(path, headers=headers or {}) as session:
            yield InProcessWebSocket(session)

    @contextmanager
    def speech_session(self, **session: Any) -> Iterator[InProcessWebSocket]:
        """`/v1/audio/speech/stream` opened with `session` (the fake engine's alloy, wav,
        unless it says otherwise), its `session.created` read."""
        options = {"model": "fake", "voice": "alloy", "response_format": "wav", **session}
        with self.websocket("/v1/audio/speech/stream") as ws:
            ws.send(json.dumps({"type": "session.update", "session": options}))
            created = json.loads(ws.recv())
            assert created["type"] == "session.created", created
            yield ws


@contextmanager
def in_process(settings: Settings) -> Iterator[InProcessApp]:
    """`create_app(settings)`, started, until the block ends (then stopped, as on shutdown)."""
    app = create_app(settings)
    # Server errors come back as 500s, as a client would see them, not raised into the test.
    with TestClient(app, base_url=BASE_URL, raise_server_exceptions=False) as http:
        yield InProcessApp(app, http)


def websocket(
    server: InProcessApp | RunningServer, path: str, headers: dict[str, str] | None = None
) -> AbstractContextManager[InProcessWebSocket | ClientConnection]:
    """A WebSocket session on `path`: in-process on an `InProcessApp`, over a real socket with
    `websockets`' client on a `RunningServer` (the same calls serve both)."""
    if isinstance(server, InProcessApp):
        return server.websocket(path, headers)
    return connect(server.url.replace("http", "ws") + path, additional_headers=headers)


def http_client(
    server: InProcessApp | RunningServer, path: str = "", headers: dict[str, str] | None = None
) -> httpx.Client | httpx2.Client:
    """A client of `server` at its URL + `path`, sending `headers`: in-process, or over a real
    socket (30 s a request at most)."""
    if isinstance(server, InProcessApp):
        return server.client(path, headers)
    return httpx.Client(base_url=server.url + path, headers=headers, timeout=30)


def sdk(server: InProcessApp | RunningServer, key: str = "unused") -> openai.OpenAI:
    """The official SDK on `server` with `key`, without retries: in-process, or over a real
    socket."""
    return server.sdk(key) if isinstance(server, InProcessApp) else sdk_client(server, key)
