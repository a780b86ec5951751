"""A fake OpenAI-compatible LLM server on loopback, in a background thread of the test process.

It answers `POST /v1/chat/completions` with `tokens`, whole or streamed as OpenAI's
`chat.completion.chunk` events, and records every request. Tests change its behaviour through
the attributes of `FakeUpstream` (`reset()` restores the defaults), and observe it through its
events rather than the clock: a stream can be held mid-way until `release()`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from tests.helpers.server import serving

# A held stream gives up after this long, so that a failed test cannot hang the server.
_HOLD_TIMEOUT = 30.0
_POLL = 0.01

BAD_REQUEST = {
    "error": {
        "message": "fake upstream: 'messages' is malformed",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "fake_bad_request",
    }
}


@dataclass
class RecordedRequest:
    headers: dict[str, str]
    """Header names lower-cased."""
    body: dict[str, Any]


@dataclass
class FakeUpstream:
    tokens: list[str] = field(default_factory=lambda: ["Hello", ",", " world", "!"])
    """The assistant's reply, one streamed chunk per token."""
    delay: float = 0.0
    """Seconds to wait before each streamed token."""
    fail: bool = False
    """Answer every request with a 400 in OpenAI's error envelope (`BAD_REQUEST`)."""
    hold_after: int | None = None
    """Pause a stream after this many tokens until `release()` (or until the client leaves)."""
    break_after: int | None = None
    """Drop the connection after this many tokens, mid-stream."""
    requests: list[RecordedRequest] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    """Set when a stream pauses at `hold_after`."""
    finished: threading.Event = field(default_factory=threading.Event)
    """Set when a stream has sent every token and `[DONE]`."""
    client_left: threading.Event = field(default_factory=threading.Event)
    """Set when a stream stopped before its end because the client hung up."""
    released: threading.Event = field(default_factory=threading.Event)
    url: str = ""
    """Base URL, e.g. http://127.0.0.1:1234/v1 (set once the server is up)."""

    def release(self) -> None:
        self.released.set()

    def reset(self) -> None:
        """Back to the defaults, with nothing recorded (the URL stays)."""
        self.release()  # a stream still held from before must not wait for nobody
        fresh = FakeUpstream(url=self.url)
        for attribute in fields(self):
            setattr(self, attribute.name, getattr(fresh, attribute.name))

    @property
    def last(self) -> RecordedRequest:
        return self.requests[-1]

    async def _events(self, request: Request, model: str) -> AsyncIterator[bytes]:
        # Bound now: a `reset()` from the next test must not change a stream under way.
        tokens, delay = list(self.tokens), self.delay
        hold_after, break_after = self.hold_after, self.break_after
        held, released = self.held, self.released
        finished, client_left = self.finished, self.client_left
        # Unless the stream ends some other way, it ended because the client left: then the
        # server cancels it, or `_hold` sees the disconnect.
        outcome: threading.Event | None = client_left
        try:
            yield _chunk(model, {"role": "assistant", "content": ""})
            for sent, token in enumerate(tokens):
                if sent == break_after:
                    outcome = None
                    # uvicorn closes the connection without ending the chunked body.
                    raise RuntimeError("fake upstream: dropping the connection")
                if sent == hold_after:
                    held.set()
                    try:
                        if not await _hold(released, request):
                            return
                    except TimeoutError:
                        outcome = None  # nobody released it: not the client's doing
                        raise
                if delay:
                    await asyncio.sleep(delay)
                yield _chunk(model, {"content": token})
            yield _chunk(model, {}, finish_reason="stop")
            yield b"data: [DONE]\n\n"
            outcome = finished
        finally:
            if outcome is not None:
                outcome.set()


async def _hold(released: threading.Event, request: Request) -> bool:
    """Wait for `released`; False if the client leaves first."""
    # Bounded, and an error rather than a return, so that a test that forgets to release
    # fails instead of seeing the client leave.
    async with asyncio.timeout(_HOLD_TIMEOUT):
        while not released.is_set():
            if await request.is_disconnected():
                return False
            await asyncio.sleep(_POLL)
    return True


def _chunk(model: str, delta: dict[str, str], finish_reason: str | None = None) -> bytes:
    event = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    return f"data: {json.dumps(event)}\n\n".encode()


def _completion(model: str, tokens: list[str]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(tokens)},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 1,
            "completion_tokens": len(tokens),
            "total_tokens": 1 + len(tokens),
        },
    }


def _app(upstream: FakeUpstream) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Response:
        body = await request.json()
        upstream.requests.append(RecordedRequest(dict(request.headers), body))
        if upstream.fail:
            return JSONResponse(BAD_REQUEST, status_code=400)
        model = str(body.get("model", "fake"))
        if body.get("stream"):
            return StreamingResponse(
                upstream._events(request, model), media_type="text/event-stream"
            )
        return JSONResponse(_completion(model, upstream.tokens))

    return app


@contextmanager
def running_upstream(upstream: FakeUpstream | None = None) -> Iterator[FakeUpstream]:
    """Serve a `FakeUpstream` on a free loopback port until the block ends."""
    upstream = upstream or FakeUpstream()
    with serving(_app(upstream), "fake-llm-upstream", lifespan="off") as url:
        upstream.url = f"{url}/v1"
        try:
            yield upstream
        finally:
            upstream.release()
