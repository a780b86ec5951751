"""`speechgate say`: speech to a file, in-process, without a server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from speechgate.audio.formats import parse_format
from speechgate.cli.common import console, load_settings
from speechgate.errors import SpeechgateError


def say(
    text: Annotated[str, typer.Argument(help="What to say.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="File to write.")],
    voice: Annotated[str, typer.Option(help="Voice name or alias.")] = "alloy",
    format: Annotated[
        str | None,
        typer.Option(
            help="A response_format name (wav, pcm_16000, ulaw_8000, mp3_44100_128, ...) "
            "[default: from the file suffix]."
        ),
    ] = None,
    speed: Annotated[float, typer.Option(min=0.25, max=4.0)] = 1.0,
    model: Annotated[str, typer.Option(help="Model or engine id.")] = "tts-1",
    seed: Annotated[
        int | None, typer.Option(min=0, help="Repeatable output, on models that can.")
    ] = None,
    captions: Annotated[
        Path | None,
        typer.Option(help="Also write captions from the word times: SRT or WebVTT, by suffix."),
    ] = None,
    normalize: Annotated[
        bool | None,
        typer.Option(
            "--normalize/--no-normalize",
            help='Read numbers, dates, units and abbreviations as meant ("$5" as "five '
            'dollars") or as written [default: the text_normalization setting].',
        ),
    ] = None,
) -> None:
    """Synthesize to a file in-process, without a server (built-in or stored voices)."""
    from speechgate.captions import CAPTION_FORMATS
    from speechgate.standalone import synthesize_to_file

    try:
        fmt = parse_format(format or output.suffix.lstrip(".").lower() or "mp3")
    except ValueError as error:
        reason = (
            str(error) if format else f"cannot tell the format from {output.name!r}; pass --format"
        )
        raise typer.BadParameter(reason, param_hint="--format") from None
    if captions is not None and captions.suffix.lower() not in CAPTION_FORMATS:
        raise typer.BadParameter(
            f"captions are .srt or .vtt files, not {captions.name!r}", param_hint="--captions"
        )
    try:
        seconds = synthesize_to_file(
            load_settings(),
            text,
            output,
            model=model,
            voice=voice,
            fmt=fmt,
            speed=speed,
            seed=seed,
            captions=captions,
            normalization="auto" if normalize is None else "on" if normalize else "off",
        )
    except SpeechgateError as error:
        console.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(1) from None
    console.print(f"wrote {output} ({seconds:.2f} s of audio, {fmt})")
    if captions is not None:
        console.print(f"wrote {captions}")
