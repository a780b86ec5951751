"""The `speechgate` command: serve, say, voices."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from speechgate.audio.formats import AudioFormat
from speechgate.errors import SpeechgateError
from speechgate.settings import Settings

app = typer.Typer(help="OpenAI-compatible speech server for local text-to-speech engines.")
console = Console()


def _settings(**overrides: Any) -> Settings:
    """Settings from the environment, with the command-line flags that were given on top."""
    return Settings(**{key: value for key, value in overrides.items() if value is not None})


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Listen address [default: 127.0.0.1].")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port [default: 8000].")] = None,
    engine: Annotated[
        list[str] | None, typer.Option(help="Engine to load (repeatable) [default: piper, espeak].")
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes per engine.")] = None,
    default_engine: Annotated[str | None, typer.Option(help="Engine behind tts-1 etc.")] = None,
) -> None:
    """Run the HTTP server. Every setting can also come from SPEECHGATE_* variables."""
    import uvicorn

    from speechgate.api.app import create_app

    engines = engine
    settings = _settings(
        host=host,
        port=port,
        engines=engines,
        workers=workers,
        default_engine=default_engine or (engines[0] if engines else None),
    )
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info")


@app.command()
def say(
    text: Annotated[str, typer.Argument(help="What to say.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="File to write.")],
    voice: Annotated[str, typer.Option(help="Voice name or alias.")] = "alloy",
    format: Annotated[
        AudioFormat | None, typer.Option(help="Audio format [default: from the file suffix].")
    ] = None,
    speed: Annotated[float, typer.Option(min=0.25, max=4.0)] = 1.0,
    model: Annotated[str, typer.Option(help="Model or engine id.")] = "tts-1",
) -> None:
    """Synthesize to a file in-process, without a server."""
    from speechgate.local import synthesize_to_file

    try:
        fmt = format or AudioFormat(output.suffix.lstrip(".").lower() or "mp3")
    except ValueError:
        raise typer.BadParameter(
            f"cannot tell the format from {output.name!r}; pass --format", param_hint="--format"
        ) from None
    try:
        seconds = synthesize_to_file(
            _settings(), text, output, model=model, voice=voice, fmt=fmt, speed=speed
        )
    except SpeechgateError as error:
        console.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(1) from None
    console.print(f"wrote {output} ({seconds:.2f} s of audio, {fmt})")


@app.command()
def voices(
    model: Annotated[str, typer.Option(help="Model or engine id.")] = "tts-1",
) -> None:
    """List the voices a model offers, with their aliases."""
    from speechgate.local import load_catalog

    catalog, engine = load_catalog(_settings(), model)
    table = Table("voice", "name", "language")
    for voice in engine.voices():
        table.add_row(voice.id, voice.name, voice.language or "")
    console.print(table)
    aliases = [
        name
        for name in catalog.voice_names(engine.name)
        if name not in {v.id for v in engine.voices()}
    ]
    console.print(f"aliases: {', '.join(aliases)}")


if __name__ == "__main__":
    app()
