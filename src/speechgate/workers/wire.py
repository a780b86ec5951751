"""Framing of the messages between the gateway and a worker: a 4-byte length, then a pickle.

The gateway reads through asyncio streams, so a worker that stalls mid-message never blocks
the event loop; the worker side is plain blocking socket I/O.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import struct

_HEADER = struct.Struct("!I")


def encode(message: object) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(payload)) + payload


async def read_message(reader: asyncio.StreamReader) -> object:
    """The next message; raises `asyncio.IncompleteReadError` when the worker is gone."""
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return pickle.loads(await reader.readexactly(size))


def send(sock: socket.socket, message: object) -> None:
    sock.sendall(encode(message))


def receive(sock: socket.socket) -> object:
    """Block for the next message; raises `EOFError` when the gateway is gone."""
    (size,) = _HEADER.unpack(_exactly(sock, _HEADER.size))
    return pickle.loads(_exactly(sock, size))


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        part = sock.recv(size - len(data))
        if not part:
            raise EOFError("connection closed")
        data += part
    return bytes(data)
