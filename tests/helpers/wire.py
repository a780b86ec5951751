"""Raw HTTP/1.1 over sockets, for what no well-behaved client library will send."""

from __future__ import annotations

import json
import select
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

_READ_TIMEOUT = 30.0


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def connect(url: str) -> socket.socket:
    """A TCP connection to the server at `url` (http://host:port)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=_READ_TIMEOUT)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a timeout fails the test:
    the server neither answered nor closed)."""
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    return bytes(data)


def parse_response(raw: bytes) -> RawResponse:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return RawResponse(int(status_line.split()[1]), headers, body)


def closed_by_server(socks: list[socket.socket], wait: float = 0.0) -> list[socket.socket]:
    """Those of `socks` the server has closed (their next read is end of file), after
    waiting up to `wait` seconds for one of them to become readable."""
    readable, _, _ = select.select(socks, [], [], wait) if socks else ([], [], [])
    closed = []
    for sock in readable:
        try:
            if sock.recv(1, socket.MSG_PEEK) == b"":
                closed.append(sock)
        except ConnectionResetError:
            closed.append(sock)
    return closed


def wait_until_closed(socks: list[socket.socket], count: int, timeout: float = 30.0) -> int:
    """Waits (bounded) until at least `count` of `socks` are closed by the server; returns how
    many are."""
    deadline = time.monotonic() + timeout
    while True:
        closed = closed_by_server(socks)
        if len(closed) >= count or time.monotonic() > deadline:
            return len(closed)
        open_ones = [sock for sock in socks if sock not in closed]
        # Sleeps only until something happens on a socket still open, or briefly.
        select.select(open_ones, [], [], 0.05)


def read_response(sock: socket.socket) -> RawResponse:
    """One response with a content-length, leaving the connection as it is."""
    data = bytearray()
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "closed before a response"
        data += chunk
    response = parse_response(bytes(data))
    while len(response.body) < int(response.headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "closed mid-response"
        response.body += chunk
    return response
