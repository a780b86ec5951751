"""`speechgate chat`: ask the server's LLM relay, and hear the answer as it is written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from speechgate.audio.formats import parse_format
from speechgate.cli.common import console, require_extra


def chat(
    question: Annotated[str, typer.Argument(help="What to ask the LLM.")],
    speak: Annotated[
        Path | None, typer.Option(help="Speak the answer into this file while it streams.")
    ] = None,
    url: Annotated[str, typer.Option(help="speechgate server.")] = "http://127.0.0.1:8000",
    llm_model: Annotated[str, typer.Option(help="The upstream's chat model.")] = "gpt-4o-mini",
    model: Annotated[str, typer.Option(help="Speech model.")] = "tts-1",
    voice: Annotated[str, typer.Option(help="Voice name or alias.")] = "alloy",
    api_key: Annotated[str, typer.Option(envvar="OPENAI_API_KEY")] = "unused",
) -> None:
    """Ask the server's LLM relay; with --speak, the answer is spoken as it is written."""
    require_extra("chat", "openai")
    import asyncio

    import openai
    from openai.types.chat import ChatCompletionMessageParam

    from speechgate.spoken_chat import answer_deltas, speak_answer

    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": question}]

    def show(delta: str) -> None:
        console.print(delta, end="", soft_wrap=True, highlight=False)

    if speak is None:

        async def print_answer() -> None:
            async with openai.AsyncOpenAI(
                base_url=f"{url}/v1", api_key=api_key, max_retries=0
            ) as llm:
                async for delta in answer_deltas(llm, messages, llm_model):
                    show(delta)

        asyncio.run(print_answer())
        console.print()
        return
    fmt = parse_format(speak.suffix.lstrip(".").lower() or "mp3")
    speech = {"model": model, "voice": voice, "response_format": fmt.name}
    with speak.open("wb") as output:
        answer = asyncio.run(
            speak_answer(url, messages, llm_model, speech, output, api_key=api_key, on_text=show)
        )
    delay = answer.first_sentence_delay()
    console.print(
        f"\nwrote {speak} ({answer.audio_seconds:.1f} s of audio); first audio "
        f"{(answer.first_audio or 0) * 1000:.0f} ms after asking"
        + ("" if delay is None else f", {delay * 1000:.0f} ms after its sentence was complete")
    )
