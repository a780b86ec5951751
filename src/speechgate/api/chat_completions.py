"""`POST /v1/chat/completions`: relayed to the configured OpenAI-compatible LLM server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from fastapi.responses import Response

from speechgate.api.error_handlers import error_body
from speechgate.api.http import ClientGone, ClosingResponse, require_json, unless_disconnected
from speechgate.api.schemas import ErrorResponse, error_responses
from speechgate.api.state import app_state
from speechgate.errors import NotConfigured, UpstreamError
from speechgate.openai_upstream import ChatStream, LlmRelay

router = APIRouter()

# Proxies such as nginx buffer responses unless told not to, which would hold tokens back.
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_EVENT_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")
_EXAMPLE = {"model": "llama3.2", "messages": [{"role": "user", "content": "Say hello."}]}
_PASSED_THROUGH = {"model": ErrorResponse, "description": "The upstream's error, relayed."}


async def get_llm(request: Request) -> LlmRelay:
    llm = app_state(request).llm
    if llm is None:
        raise NotConfigured(
            "This server relays chat completions only when SPEECHGATE_LLM__BASE_URL names an "
            "OpenAI-compatible LLM server, and it is not set.",
            code="llm_not_configured",
        )
    return llm


@router.post(
    "/v1/chat/completions",
    summary="Create a chat completion (relayed to the configured LLM server)",
    response_class=Response,
    responses={
        200: {
            "description": "The upstream's completion; with `stream: true`, its server-sent "
            "events, each relayed as soon as it arrives.",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {"schema": {"type": "string"}},
            },
        },
        **error_responses(400, 404, 413, 415, 502, 504),
        "4XX": _PASSED_THROUGH,
        "5XX": _PASSED_THROUGH,
    },
    dependencies=[Depends(require_json)],
)
async def create_chat_completion(
    body: Annotated[
        dict[str, Any],
        Body(
            description="OpenAI's chat completion request, relayed unchanged: the model names "
            "and the checks are the upstream's.",
            openapi_examples={"chat": {"value": _EXAMPLE}},
        ),
    ],
    request: Request,
    llm: Annotated[LlmRelay, Depends(get_llm)],
) -> Response:
    # Until the upstream answers, a client that leaves cancels the upstream request with it.
    try:
        if body.get("stream") is True:
            return _RelayResponse(await unless_disconnected(request, llm.open_stream(body)))
        upstream = await unless_disconnected(request, llm.complete(body))
    except ClientGone:
        # Nobody is listening; 499 (nginx's "client closed request") only reaches the logs.
        return Response(status_code=499)
    return Response(upstream.content, upstream.status_code, media_type="application/json")


class _RelayResponse(ClosingResponse):
    """The upstream's events, chunk by chunk; however the response ends, the upstream request
    ends with it.

    When the client leaves, Starlette cancels the response. Landing on the body's read from
    the upstream, that cancellation makes httpx drop the connection itself; landing on a
    `send`, it leaves the body generator suspended at a `yield`, with the upstream still
    generating. Hence the close here, not in the generator.
    """

    def __init__(self, stream: ChatStream) -> None:
        super().__init__(_relay(stream), stream.aclose, "text/event-stream", _SSE_HEADERS)


async def _relay(stream: ChatStream) -> AsyncIterator[bytes]:
    at_event_end = True
    try:
        async for chunk in stream.chunks():
            at_event_end = chunk.endswith(_EVENT_ENDS)
            yield chunk
    except UpstreamError as error:
        # The headers are out, so the status cannot change; OpenAI's SDKs raise on an event
        # with an `error` member. The blank line first ends any event cut off mid-way.
        separator = b"" if at_event_end else b"\n\n"
        yield separator + f"data: {json.dumps(error_body(error))}\n\n".encode()
