"""The client side of an OpenAI-compatible upstream: `LlmRelay` relays chat completions to an
LLM server, and `upstream_errors` / `raise_for_error` turn any upstream's failures into
speechgate errors (`UpstreamRejected`, `UpstreamBadResponse`, `UpstreamUnavailable`,
`UpstreamTimeout`)."""

from __future__ import annotations

import codecs
import json
import logging
import re
import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import httpx
from pydantic import SecretStr

from speechgate.errors import (
    UpstreamBadResponse,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from speechgate.settings import LlmSettings

log = logging.getLogger(__name__)

COMPLETIONS_PATH = "chat/completions"
# Relayed from an upstream error: they tell OpenAI's SDKs when a retry may succeed.
_RETRY_HEADERS = ("retry-after", "retry-after-ms")
# SSE lines end in CRLF, LF or CR. A CR at the very end of what has arrived stays pending: it
# may be the first half of a CRLF split between two chunks.
_LINE_END = re.compile(r"\r\n|\r(?!\Z)|\n")
_DONE = "[DONE]"


class LlmRelay:
    """Sends chat completions to one upstream over a long-lived connection pool shared by
    every request of the app; `aclose()` it on shutdown."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: SecretStr | None = None,
        ca_bundle: Path | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.base_url = base_url
        self.timeout = timeout
        headers = (
            {} if api_key is None else {"Authorization": f"Bearer {api_key.get_secret_value()}"}
        )
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=timeout,
            verify=True if ca_bundle is None else ssl.create_default_context(cafile=ca_bundle),
            # Only settings.py reads the environment: no proxy or CA variables from here.
            trust_env=False,
        )

    @classmethod
    def from_settings(cls, settings: LlmSettings) -> LlmRelay | None:
        if settings.base_url is None:
            return None
        return cls(
            settings.base_url,
            api_key=settings.api_key,
            ca_bundle=settings.ca_bundle,
            timeout=settings.timeout,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def complete(self, body: Mapping[str, Any]) -> httpx.Response:
        """Send `body` and return the upstream's 2xx JSON answer; `open_stream` for streams."""
        with upstream_errors(self.base_url, self.timeout):
            response = await self._client.post(COMPLETIONS_PATH, json=body)
        raise_for_error(response)
        try:
            response.json()
        except ValueError as error:
            raise UpstreamBadResponse("The LLM upstream answered with invalid JSON.") from error
        return response

    async def open_stream(self, body: Mapping[str, Any]) -> ChatStream:
        """Send `body` (with `"stream": true`) and return once the upstream has accepted it."""
        request = self._client.build_request("POST", COMPLETIONS_PATH, json=body)
        with upstream_errors(self.base_url, self.timeout):
            response = await self._client.send(request, stream=True)
        try:
            if not response.is_success:
                with upstream_errors(self.base_url, self.timeout):
                    await response.aread()
                raise_for_error(response)
            content_type = response.headers.get("content-type", "")
            if not content_type.startswith("text/event-stream"):
                raise UpstreamBadResponse(
                    f"The LLM upstream answered a streaming request with {content_type!r}, "
                    "not text/event-stream."
                )
        except BaseException:
            await response.aclose()
            raise
        return ChatStream(response, self.timeout)

    async def stream_text(self, body: Mapping[str, Any]) -> AsyncIterator[str]:
        """Yield the assistant's non-empty content deltas as they arrive; closing the
        generator ends the upstream request."""
        async with await self.open_stream({**body, "stream": True}) as stream:
            async for data in iter_sse_data(stream.chunks()):
                if data == _DONE:
                    return
                delta = _content_delta(data)
                if delta:
                    yield delta


class ChatStream:
    """A streamed completion the upstream accepted. Iterate `chunks()` once and always
    `aclose()`: closing early hangs up on the upstream, which then stops generating."""

    def __init__(self, response: httpx.Response, timeout: float) -> None:
        self._response = response
        self._timeout = timeout

    async def chunks(self) -> AsyncIterator[bytes]:
        """The upstream's bytes as they arrive, not re-framed into events."""
        with upstream_errors(self._response.request.url, self._timeout):
            async for chunk in self._response.aiter_bytes():
                if chunk:
                    yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def iter_sse_data(chunks: AsyncIterable[bytes]) -> AsyncIterator[str]:
    """Yield the `data` of each server-sent event in `chunks` as soon as it is complete."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    data: list[str] = []
    async for chunk in chunks:
        *lines, pending = _LINE_END.split(pending + decoder.decode(chunk))
        for line in lines:
            event = _feed(line, data)
            if event is not None:
                yield event
    # Some upstreams omit the blank line after their last event.
    rest = (pending + decoder.decode(b"", final=True)).removesuffix("\r")
    for line in [*_LINE_END.split(rest), ""]:
        event = _feed(line, data)
        if event is not None:
            yield event


def _feed(line: str, data: list[str]) -> str | None:
    if not line:
        event = "\n".join(data) if data else None
        data.clear()
        return event
    field, _, value = line.partition(":")
    if field == "data":
        data.append(value.removeprefix(" "))
    return None


def _content_delta(data: str) -> str | None:
    """`choices[0].delta.content` of a streamed chunk, if any."""
    try:
        chunk = json.loads(data)
    except ValueError as invalid:
        raise UpstreamBadResponse("The LLM upstream sent an event that is not JSON.") from invalid
    if not isinstance(chunk, dict):
        raise UpstreamBadResponse("The LLM upstream sent an event that is not a JSON object.")
    error = _openai_error(chunk)
    if error is not None:
        # Sent after a 200, so there is no status of the upstream's to keep.
        raise _rejected(502, error, {})
    for choice in chunk.get("choices") or ():
        # With n > 1 each chunk may carry another choice; the first is the one spoken.
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            return content if isinstance(content, str) else None
    return None


def raise_for_error(response: httpx.Response, what: str = "LLM upstream") -> None:
    """Raise unless `response` is a 2xx, relaying the upstream's OpenAI error if it sent one."""
    if response.is_success:
        return
    try:
        payload = response.json()
    except ValueError:
        payload = None
    error = _openai_error(payload)
    if response.is_error and error is not None:
        headers = {
            name: response.headers[name] for name in _RETRY_HEADERS if name in response.headers
        }
        raise _rejected(response.status_code, error, headers)
    log.warning("%s answered %d: %.200r", what, response.status_code, response.text)
    raise UpstreamBadResponse(
        f"The {what} answered {response.status_code} without an OpenAI error body."
    )


def _openai_error(payload: object) -> dict[str, Any] | None:
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    if isinstance(error, str):
        # `{"error": "..."}`: what several servers' native APIs answer, proxied or not.
        error = {"message": error}
    elif not isinstance(error, dict) and payload.get("object") == "error":
        # Older vLLM releases sent the error's fields at the top level.
        error = payload
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error
    return None


def _rejected(status: int, error: Mapping[str, Any], headers: dict[str, str]) -> UpstreamRejected:
    default_type = "invalid_request_error" if status < 500 else "server_error"
    param, code = error.get("param"), error.get("code")
    return UpstreamRejected(
        status,
        error["message"],
        error_type=str(error.get("type") or default_type),
        param=param if isinstance(param, str) else None,
        # llama.cpp and vLLM send the HTTP status as an integer code; OpenAI's are strings.
        code=str(code) if isinstance(code, str | int) and not isinstance(code, bool) else None,
        headers=headers,
    )


@contextmanager
def upstream_errors(
    url: httpx.URL | str, timeout: float, what: str = "LLM upstream"
) -> Iterator[None]:
    """Turn httpx's failures into speechgate's; the details and the URL go to the log only."""
    try:
        yield
    except httpx.TimeoutException as error:
        log.warning("%s %s timed out: %r", what, url, error)
        raise UpstreamTimeout(
            f"The {what} sent nothing for {timeout:g} s; the request was abandoned."
        ) from error
    except httpx.RequestError as error:
        log.warning("%s %s failed: %r", what, url, error)
        raise UpstreamUnavailable(
            f"The {what} could not be reached or dropped the connection."
        ) from error
