"""Request bodies and ids at the edge, on a real server over raw sockets: a body over the limit
is answered 413 at once, a body that stops coming 408, both closing the connection; a
client's request id is echoed only when it is short and printable."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers.server import RunningServer, running_server
from tests.helpers.settings import fake_settings
from tests.helpers.wire import (
    RawResponse,
    connect,
    parse_response,
    read_response,
    read_until_closed,
)

LIMIT = 1024
SPEECH_HEAD = b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"


@pytest.fixture(scope="module")
def edge() -> Iterator[RunningServer]:
    settings = fake_settings(
        server={"max_body_bytes": LIMIT, "body_timeout": 1.0},
    )
    with running_server(settings) as running:
        yield running


def assert_envelope(response: RawResponse, status: int, code: str) -> None:
    assert response.status == status
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"]["code"] == code
    assert response.headers["connection"] == "close"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def test_a_chunked_body_crossing_the_limit_in_its_last_piece_is_413(edge: RunningServer) -> None:
    with connect(edge.url) as sock:
        body = chunk(b'{"input": "' + b"a" * 1000) + chunk(b"a" * 100 + b'"}') + chunk(b"")
        sock.sendall(SPEECH_HEAD + b"transfer-encoding: chunked\r\n\r\n" + body)
        assert_envelope(parse_response(read_until_closed(sock)), 413, "payload_too_large")


def test_a_body_still_coming_past_the_limit_is_413_before_its_end(edge: RunningServer) -> None:
    with connect(edge.url) as sock:
        sock.sendall(SPEECH_HEAD + b"transfer-encoding: chunked\r\n\r\n" + chunk(b"a" * 2000))
        # The body has not ended (no last chunk): the answer comes anyway.
        assert_envelope(read_response(sock), 413, "payload_too_large")
        sock.sendall(chunk(b"a" * 2000) + chunk(b""))  # read and dropped, then closed
        assert read_until_closed(sock) == b""


def test_a_declared_body_that_never_comes_is_408(edge: RunningServer) -> None:
    with connect(edge.url) as sock:
        sock.sendall(SPEECH_HEAD + b"content-length: 100\r\n\r\n" + b'{"model": ')
        assert_envelope(parse_response(read_until_closed(sock)), 408, "request_timeout")


@pytest.mark.parametrize(
    "given",
    ["a" * 129, "a" * 10_000, "two words", "caf\u00e9"],
    ids=["129-chars", "10k-chars", "space", "non-ascii"],
)
def test_an_unreasonable_request_id_is_replaced(
    edge: RunningServer, given: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="speechgate.access"):
        response = httpx.get(
            f"{edge.url}/healthz",
            headers={"x-request-id": given.encode("utf-8")},  # type: ignore[dict-item]
            timeout=30,
        )
    assert response.status_code == 200
    echoed = response.headers["x-request-id"]
    assert echoed != given and echoed.startswith("req_")
    assert not any(given in record.getMessage() for record in caplog.records)


def test_a_reasonable_request_id_is_echoed(edge: RunningServer) -> None:
    given = "trace-" + "x" * 122
    response = httpx.get(f"{edge.url}/healthz", headers={"x-request-id": given}, timeout=30)
    assert response.headers["x-request-id"] == given
