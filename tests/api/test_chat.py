"""`POST /v1/chat/completions` is relayed to an OpenAI-compatible upstream, whole or streamed."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import certifi
import httpx
import openai
import pytest
from pydantic import SecretStr, ValidationError

from speechgate.errors import (
    UpstreamBadResponse,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from speechgate.openai_upstream import LlmRelay, iter_sse_data, raise_for_error
from speechgate.settings import Settings
from tests.helpers.inprocess import InProcessApp, in_process
from tests.helpers.settings import fake_settings
from tests.helpers.upstream import BAD_REQUEST, FakeUpstream, running_upstream
from tests.helpers.waiting import wait_for

MESSAGES: list[Any] = [{"role": "user", "content": "Say hello."}]


def closed_port_url() -> str:
    """A loopback URL nothing listens on: the port was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def relay_settings(llm_base_url: str | None) -> Settings:
    return fake_settings(
        llm={"base_url": llm_base_url, "api_key": "sk-up" if llm_base_url else None},
    )


@pytest.fixture(scope="module")
def fake_upstream() -> Iterator[FakeUpstream]:
    with running_upstream() as upstream:
        yield upstream


@pytest.fixture
def upstream(fake_upstream: FakeUpstream) -> FakeUpstream:
    fake_upstream.reset()
    return fake_upstream


@pytest.fixture(scope="module")
def relay(fake_upstream: FakeUpstream) -> Iterator[InProcessApp]:
    with in_process(relay_settings(fake_upstream.url)) as running:
        yield running


@pytest.fixture
def llm(relay: InProcessApp) -> Iterator[openai.OpenAI]:
    with relay.sdk() as client:
        yield client


def stream_tokens(llm: openai.OpenAI) -> Generator[str, None, None]:
    stream = llm.chat.completions.create(model="fake-llm", messages=MESSAGES, stream=True)
    with stream:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                yield chunk.choices[0].delta.content


def assert_envelope(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code
    return dict(error)


# --- through the server, with the openai SDK ----------------------------------------------


def test_completion_round_trips(upstream: FakeUpstream, llm: openai.OpenAI) -> None:
    completion = llm.chat.completions.create(
        model="fake-llm", messages=MESSAGES, temperature=0.5, extra_body={"top_k": 3}
    )
    assert completion.choices[0].message.content == "Hello, world!"
    assert completion.model == "fake-llm"
    # Relayed unchanged, the fields speechgate knows nothing about included.
    assert upstream.last.body == {
        "model": "fake-llm",
        "messages": MESSAGES,
        "temperature": 0.5,
        "top_k": 3,
    }


def test_upstream_gets_the_configured_key_not_the_clients(
    upstream: FakeUpstream, llm: openai.OpenAI
) -> None:
    llm.chat.completions.create(model="fake-llm", messages=MESSAGES)
    assert list(stream_tokens(llm))
    assert [request.headers["authorization"] for request in upstream.requests] == [
        "Bearer sk-up",
        "Bearer sk-up",
    ]


def test_stream_yields_every_token_in_order(upstream: FakeUpstream, llm: openai.OpenAI) -> None:
    upstream.tokens = ["One", " two", " three", " four", "."]
    upstream.delay = 0.001  # each token its own write
    assert list(stream_tokens(llm)) == upstream.tokens
    assert upstream.last.body["stream"] is True
    assert upstream.finished.is_set()


def test_stream_is_server_sent_events(upstream: FakeUpstream, relay: InProcessApp) -> None:
    body = {"model": "fake-llm", "messages": MESSAGES, "stream": True}
    with relay.http.stream("POST", "/v1/chat/completions", json=body) as sse:
        assert sse.status_code == 200
        assert sse.headers["content-type"].startswith("text/event-stream")
        text = sse.read().decode()
    assert text.endswith("data: [DONE]\n\n")


def test_chunks_are_relayed_before_the_upstream_finishes(
    upstream: FakeUpstream, llm: openai.OpenAI
) -> None:
    upstream.hold_after = 1  # the upstream cannot finish before release()
    tokens = stream_tokens(llm)
    assert next(tokens) == "Hello"
    assert not upstream.finished.is_set()
    assert not upstream.client_left.is_set()
    upstream.release()
    assert list(tokens) == [",", " world", "!"]
    assert upstream.finished.is_set()


def test_client_leaving_mid_stream_ends_the_upstream_request(
    upstream: FakeUpstream, llm: openai.OpenAI
) -> None:
    upstream.hold_after = 1
    tokens = stream_tokens(llm)
    assert next(tokens) == "Hello"
    tokens.close()  # closes the SDK's stream, and so the connection
    wait_for(upstream.client_left.is_set)
    assert not upstream.finished.is_set()


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_error_is_relayed(
    upstream: FakeUpstream, llm: openai.OpenAI, stream: bool
) -> None:
    upstream.fail = True
    with pytest.raises(openai.BadRequestError) as raised:
        llm.chat.completions.create(model="fake-llm", messages=MESSAGES, stream=stream)
    assert raised.value.status_code == 400
    assert raised.value.body == BAD_REQUEST["error"]


def test_upstream_dropping_mid_stream_ends_with_an_error_event(
    upstream: FakeUpstream, llm: openai.OpenAI
) -> None:
    upstream.break_after = 2
    received: list[str] = []
    with pytest.raises(openai.APIError) as raised:
        received.extend(stream_tokens(llm))
    assert received == ["Hello", ","]
    assert raised.value.code == "upstream_unavailable"


@pytest.mark.parametrize(
    ("body", "code"), [(b"[1, 2]", "invalid_body"), (b"{not json", "invalid_json")]
)
def test_body_must_be_a_json_object(relay: InProcessApp, body: bytes, code: str) -> None:
    response = relay.http.post(
        "/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
    )
    error = assert_envelope(response, 400, code)
    assert error["type"] == "invalid_request_error"


def test_route_is_documented(relay: InProcessApp) -> None:
    document = relay.http.get("/openapi.json").json()
    responses = document["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert set(responses["200"]["content"]) == {"application/json", "text/event-stream"}
    assert {"400", "404", "502", "504", "4XX", "5XX"} <= set(responses)


@pytest.fixture(scope="module")
def unreachable() -> Iterator[InProcessApp]:
    with in_process(relay_settings(closed_port_url())) as running:
        yield running


@pytest.mark.parametrize("stream", [False, True])
def test_unreachable_upstream_is_502(unreachable: InProcessApp, stream: bool) -> None:
    body = {"model": "fake-llm", "messages": MESSAGES, "stream": stream}
    response = unreachable.http.post("/v1/chat/completions", json=body)
    error = assert_envelope(response, 502, "upstream_unavailable")
    assert error["type"] == "server_error"
    assert "127.0.0.1" not in error["message"]  # the upstream's address stays private


def test_without_an_upstream_the_route_is_404() -> None:
    with in_process(relay_settings(None)) as server:
        body = {"model": "fake-llm", "messages": MESSAGES}
        response = server.http.post("/v1/chat/completions", json=body)
        with (
            server.sdk() as client,
            pytest.raises(openai.NotFoundError),
        ):
            client.chat.completions.create(model="fake-llm", messages=MESSAGES)
    error = assert_envelope(response, 404, "llm_not_configured")
    assert "SPEECHGATE_LLM__BASE_URL" in error["message"]


# --- LlmRelay on its own, against the fake upstream ---------------------------------------


def relay_to(upstream: FakeUpstream, timeout: float = 30) -> LlmRelay:
    return LlmRelay(upstream.url, api_key=SecretStr("sk-up"), timeout=timeout)


async def collect(texts: AsyncIterator[str]) -> list[str]:
    return [text async for text in texts]


def test_stream_text_yields_the_content_deltas(upstream: FakeUpstream) -> None:
    async def scenario() -> list[str]:
        async with relay_to(upstream) as relay:
            return await collect(relay.stream_text({"model": "fake-llm", "messages": MESSAGES}))

    upstream.tokens = ["Hi", " there", "."]
    assert asyncio.run(scenario()) == ["Hi", " there", "."]
    assert upstream.last.body["stream"] is True
    assert upstream.last.headers["authorization"] == "Bearer sk-up"
    assert upstream.finished.is_set()


def test_closing_stream_text_early_ends_the_upstream_request(upstream: FakeUpstream) -> None:
    async def scenario() -> str:
        async with relay_to(upstream) as relay:
            texts = relay.stream_text({"model": "fake-llm", "messages": MESSAGES})
            async with aclosing(texts):
                return await anext(texts)

    upstream.hold_after = 1
    assert asyncio.run(scenario()) == "Hello"
    wait_for(upstream.client_left.is_set)
    assert not upstream.finished.is_set()


def test_stream_text_raises_the_upstreams_error(upstream: FakeUpstream) -> None:
    async def scenario() -> list[str]:
        async with relay_to(upstream) as relay:
            return await collect(relay.stream_text({"model": "fake-llm", "messages": MESSAGES}))

    upstream.fail = True
    with pytest.raises(UpstreamRejected) as raised:
        asyncio.run(scenario())
    assert (raised.value.status_code, raised.value.code) == (400, "fake_bad_request")


def test_an_upstream_that_goes_quiet_times_out(upstream: FakeUpstream) -> None:
    async def scenario() -> list[str]:
        async with relay_to(upstream, timeout=0.2) as relay:
            return await collect(relay.stream_text({"model": "fake-llm", "messages": MESSAGES}))

    upstream.hold_after = 0  # headers and the role chunk, then nothing until released
    with pytest.raises(UpstreamTimeout) as raised:
        asyncio.run(scenario())
    assert raised.value.status_code == 504


def test_complete_against_a_closed_port_is_unavailable() -> None:
    async def scenario() -> None:
        async with LlmRelay(closed_port_url()) as relay:
            await relay.complete({"model": "fake-llm", "messages": MESSAGES})

    with pytest.raises(UpstreamUnavailable):
        asyncio.run(scenario())


# --- pure parts -----------------------------------------------------------------------------


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def sse_data(*parts: bytes) -> list[str]:
    async def scenario() -> list[str]:
        return [data async for data in iter_sse_data(_chunks(*parts))]

    return asyncio.run(scenario())


def test_sse_events_split_anywhere_are_reassembled() -> None:
    stream = 'data: {"a": 1}\r\n\r\n: a comment\n\nevent: x\ndata: one\ndata: two\n\ndata: é\n\n'
    raw = stream.encode()
    whole = sse_data(raw)
    assert whole == ['{"a": 1}', "one\ntwo", "é"]
    # Every split point, including inside CRLF and inside the two bytes of "é".
    for cut in range(1, len(raw)):
        assert sse_data(raw[:cut], raw[cut:]) == whole, cut


def test_a_last_event_without_its_blank_line_still_counts() -> None:
    assert sse_data(b"data: x\n\ndata: [DONE]") == ["x", "[DONE]"]


# --- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {"llm": {"api_key": "sk-up"}},
        {"llm": {"base_url": "127.0.0.1:11434/v1"}},
        {"llm": {"base_url": "http://127.0.0.1:11434/v1", "ca_bundle": "/nonexistent/ca.pem"}},
        {"llm": {"base_url": "http://127.0.0.1:11434/v1", "timeout": 0}},
    ],
)
def test_invalid_llm_settings_fail_at_start(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        Settings.model_validate(values)


def test_the_api_key_stays_out_of_reprs() -> None:
    settings = Settings.model_validate(
        {"llm": {"base_url": "https://llm.internal/v1", "api_key": "sk-secret"}}
    )
    assert "sk-secret" not in repr(settings)
    assert settings.llm.api_key is not None
    assert settings.llm.api_key.get_secret_value() == "sk-secret"


def test_a_ca_bundle_is_loaded_at_start() -> None:
    async def scenario(settings: Settings) -> None:
        relay = LlmRelay.from_settings(settings.llm)
        assert relay is not None
        await relay.aclose()

    bundle = certifi.where()
    settings = Settings.model_validate(
        {"llm": {"base_url": "https://llm.internal/v1", "ca_bundle": bundle}}
    )
    assert settings.llm.ca_bundle == Path(bundle)
    asyncio.run(scenario(settings))
    assert LlmRelay.from_settings(Settings.model_validate({}).llm) is None


# --- upstream answers -> errors -------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "payload", "expected"),
    [
        (400, BAD_REQUEST, (400, "invalid_request_error", "fake_bad_request")),
        (404, {"error": "model 'x' not found"}, (404, "invalid_request_error", None)),
        # Older vLLM: the error's fields at the top level, the status as an integer code.
        (
            500,
            {"object": "error", "message": "boom", "type": "Internal", "code": 500},
            (500, "Internal", "500"),
        ),
    ],
)
def test_openai_shaped_upstream_errors_keep_their_status(
    status: int, payload: dict[str, Any], expected: tuple[int, str, str | None]
) -> None:
    with pytest.raises(UpstreamRejected) as raised:
        raise_for_error(httpx.Response(status, json=payload))
    assert (raised.value.status_code, raised.value.error_type, raised.value.code) == expected


def test_retry_hints_of_an_upstream_error_are_relayed() -> None:
    response = httpx.Response(
        429,
        json={"error": {"message": "slow down", "type": "rate_limit_error"}},
        headers={"retry-after": "2", "x-other": "no"},
    )
    with pytest.raises(UpstreamRejected) as raised:
        raise_for_error(response)
    assert raised.value.headers == {"retry-after": "2"}


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(502, text="<html>Bad Gateway</html>"),
        httpx.Response(400, json={"detail": "FastAPI's shape, not OpenAI's"}),
        httpx.Response(302, headers={"location": "/login"}),
    ],
)
def test_other_upstream_answers_are_bad_responses(response: httpx.Response) -> None:
    with pytest.raises(UpstreamBadResponse) as raised:
        raise_for_error(response)
    assert raised.value.status_code == 502


def test_a_2xx_is_not_an_error() -> None:
    raise_for_error(httpx.Response(200, json={}))
