"""Reading Wyoming events from a client that may be hostile.

An event is a JSON header line, then `data_length` bytes of JSON data, then `payload_length`
bytes of payload. The `wyoming` package's reader trusts both lengths and reads them whole
into memory; this one checks the header line, the data and the payload against bounds first,
and refuses an event over them without reading any of its body.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from wyoming.event import Event

from speechgate.errors import InvalidRequest

MAX_PAYLOAD_BYTES = 65_536
"""Largest payload accepted. A TTS server takes no event that has one (audio goes out, never
in); this much is read and ignored, for a client that sends one anyway."""


def max_event_bytes(max_input_chars: int) -> int:
    """The bound on an event's header line, and on its data: room for the longest text a
    request may have, each character escaped in JSON (`\\uXXXX`), plus the other fields."""
    return 16_384 + 6 * max_input_chars


class BadEvent(InvalidRequest):
    """The client sent something that is not an event within the bounds: the connection
    cannot be read any further (where the next event starts is unknown)."""

    default_code = "invalid_event"


@dataclass(frozen=True)
class EventLimits:
    max_line_bytes: int
    max_data_bytes: int
    max_payload_bytes: int = MAX_PAYLOAD_BYTES


def _length(header: dict[str, Any], name: str, limit: int) -> int:
    value = header.get(name)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadEvent(f"`{name}` must be a whole number of bytes.", param=name)
    if value > limit:
        raise BadEvent(
            f"`{name}` is {value} bytes; the most this server reads is {limit}.",
            param=name,
            code="event_too_large",
        )
    return value


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError:  # UnicodeDecodeError too
        raise BadEvent(f"The event's {what} is not JSON.") from None
    if not isinstance(parsed, dict):
        raise BadEvent(f"The event's {what} must be a JSON object.")
    return parsed


async def read_event(reader: asyncio.StreamReader, limits: EventLimits) -> Event | None:
    """The next event, or None at the end of the stream (also mid-event: the client left).
    Raises BadEvent for anything malformed or over `limits`, before reading its body."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError:
        # The stream's own bound (see `server.start`): no newline within that many bytes.
        raise BadEvent(
            f"The event's header line is longer than {limits.max_line_bytes} bytes.",
            code="event_too_large",
        ) from None
    if len(line) > limits.max_line_bytes:
        raise BadEvent(
            f"The event's header line is longer than {limits.max_line_bytes} bytes.",
            code="event_too_large",
        )
    header = _json_object(line, "header")
    kind = header.get("type")
    if not isinstance(kind, str):
        raise BadEvent("The event has no `type`.", param="type")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise BadEvent("The event's `data` must be a JSON object.", param="data")
    data_length = _length(header, "data_length", limits.max_data_bytes)
    payload_length = _length(header, "payload_length", limits.max_payload_bytes)
    try:
        if data_length:
            data = {**data, **_json_object(await reader.readexactly(data_length), "data")}
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        return None
    return Event(type=kind, data=data, payload=payload)
