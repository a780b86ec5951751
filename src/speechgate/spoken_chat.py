"""Ask an LLM through speechgate and speak its answer while it is being written.

The answer streams from `POST /v1/chat/completions` (relayed to the configured upstream) and
every text delta goes straight into a `WS /v1/audio/speech/stream` session, so the first
sentence is heard as soon as it is complete, not after the whole answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import openai
from openai.types.chat import ChatCompletionMessageParam
from websockets.asyncio.client import ClientConnection, connect


@dataclass
class SpokenAnswer:
    """What was said and when (seconds since the question was sent)."""

    text: str = ""
    audio_seconds: float = 0.0
    deltas: list[tuple[float, str]] = field(default_factory=list)  # arrival time, text
    segments: list[tuple[float, dict[str, Any]]] = field(default_factory=list)  # arrival, event
    first_audio: float | None = None

    def first_sentence_delay(self) -> float | None:
        """From the delta that completed the first spoken segment to its first audio."""
        if self.first_audio is None or not self.segments:
            return None
        first_text = self.segments[0][1]["text"]
        written = ""
        for arrived, delta in self.deltas:
            written += delta
            if first_text in written:
                return self.first_audio - arrived
        return None


async def answer_deltas(
    llm: openai.AsyncOpenAI, messages: Sequence[ChatCompletionMessageParam], model: str
) -> AsyncIterator[str]:
    """The assistant's text as the LLM streams it."""
    stream = await llm.chat.completions.create(model=model, messages=list(messages), stream=True)
    async for chunk in stream:
        if chunk.choices and (delta := chunk.choices[0].delta.content):
            yield delta


async def speak_answer(
    base_url: str,
    messages: Sequence[ChatCompletionMessageParam],
    llm_model: str,
    speech: dict[str, Any],
    output: BinaryIO,
    api_key: str = "unused",
    on_text: Callable[[str], None] | None = None,
) -> SpokenAnswer:
    """Stream the answer to `messages` and write its speech (in `speech["response_format"]`)
    to `output`. `speech` holds the session options: model, voice, response_format, ..."""
    answer = SpokenAnswer()
    started = time.monotonic()
    ws_url = base_url.replace("http", "ws", 1).rstrip("/") + "/v1/audio/speech/stream"
    async with (
        openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key=api_key, max_retries=0) as llm,
        connect(ws_url, max_size=None) as ws,
    ):
        await ws.send(json.dumps({"type": "session.update", "session": speech}))
        created = json.loads(await ws.recv())
        if created["type"] != "session.created":
            raise RuntimeError(f"speech session refused: {created}")

        async def write_text() -> None:
            async for delta in answer_deltas(llm, messages, llm_model):
                answer.deltas.append((time.monotonic() - started, delta))
                answer.text += delta
                if on_text:
                    on_text(delta)
                await ws.send(json.dumps({"type": "input_text.delta", "delta": delta}))
            await ws.send(json.dumps({"type": "input_text.done"}))

        await asyncio.gather(write_text(), _read_audio(ws, output, answer, started))
    return answer


async def _read_audio(
    ws: ClientConnection, output: BinaryIO, answer: SpokenAnswer, started: float
) -> None:
    async for message in ws:
        if isinstance(message, bytes):
            if answer.first_audio is None:
                answer.first_audio = time.monotonic() - started
            output.write(message)
            continue
        event = json.loads(message)
        if event["type"] == "segment.started":
            answer.segments.append((time.monotonic() - started, event))
        elif event["type"] == "session.done":
            answer.audio_seconds = event["usage"]["audio_seconds"]
            return
        elif event["type"] == "error":
            raise RuntimeError(f"speech failed: {event['error']['message']}")
