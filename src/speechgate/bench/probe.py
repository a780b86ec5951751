"""A minimal HTTP/1.1 client for timing one request at a time: a kept-alive socket, the
request written in one send, the response read as it arrives.

For the gateway's own overhead: a client library's time between the socket and the caller is
the client's, not the server's, so this decodes only what HTTP/1.1 needs.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class ProbeResponse:
    status: int
    headers: dict[str, str]  # names lowercased
    body: bytes
    first_byte_after: float | None
    """Seconds from sending until the body held more than `skip` bytes (None if never)."""


class Probe:
    def __init__(self, url: str, timeout: float = 60.0) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"the probe speaks plain http only, not {url!r}")
        self._host = parts.hostname
        self._port = parts.port or 80
        self._sock = socket.create_connection((self._host, self._port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = bytearray()

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def post_json(self, path: str, body: Mapping[str, object], skip: int = 0) -> ProbeResponse:
        """POST `body` as JSON and read the whole response, noting when the body first held
        more than `skip` bytes."""
        payload = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {self._host}:{self._port}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
        )
        sent = time.monotonic()
        self._sock.sendall(head.encode() + payload)
        status, headers = self._read_head()
        body_bytes = bytearray()
        first: float | None = None
        for data in self._body(headers):
            body_bytes += data
            if first is None and len(body_bytes) > skip:
                first = time.monotonic() - sent
        return ProbeResponse(status, headers, bytes(body_bytes), first)

    # --- reading ------------------------------------------------------------------------

    def _fill(self) -> None:
        data = self._sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the server closed the connection")
        self._buffer += data

    def _line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            self._fill()
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    def _take(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._fill()
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _read_head(self) -> tuple[int, dict[str, str]]:
        status = int(self._line().split(b" ", 2)[1])
        headers: dict[str, str] = {}
        while line := self._line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    def _body(self, headers: Mapping[str, str]) -> Iterator[bytes]:
        if headers.get("transfer-encoding", "").lower() != "chunked":
            yield self._take(int(headers.get("content-length", "0")))
            return
        while size := int(self._line().split(b";")[0], 16):
            while size:
                if not self._buffer:
                    self._fill()
                data = self._take(min(size, len(self._buffer)))
                size -= len(data)
                yield data
            self._line()  # the CRLF after the chunk's data
        while self._line():  # trailers, then the blank line
            pass
