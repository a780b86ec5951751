"""`speechgate voices ...`: list a model's voices, search what can be pulled, pull."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from speechgate.cli.common import console, load_settings, megabytes
from speechgate.errors import SpeechgateError
from speechgate.settings import Settings

app = typer.Typer(
    help="Voices: list a model's, search what can be pulled, pull by name.",
    invoke_without_command=True,
)

_MODEL_OPTION = typer.Option(help="Model or engine id.")


@app.callback()
def voices(
    ctx: typer.Context,
    model: Annotated[str, _MODEL_OPTION] = "tts-1",
) -> None:
    """List the voices a model offers (as `voices list`), or search and pull voices."""
    if ctx.invoked_subcommand is None:
        _list_voices(model)


@app.command("list")
def voices_list(model: Annotated[str, _MODEL_OPTION] = "tts-1") -> None:
    """List the voices a model offers: its own, the cloned ones, and aliases."""
    _list_voices(model)


def _list_voices(model: str) -> None:
    from speechgate.standalone import load_catalog, stored_voices

    settings = load_settings()
    catalog, engine, _ = load_catalog(settings, model)
    table = Table("voice", "name", "language")
    for voice in engine.voices():
        table.add_row(voice.id, voice.name, voice.language or "")
    for stored in stored_voices(settings).list():
        if stored.engine == engine.name:
            table.add_row(stored.id, stored.name, "cloned")
    console.print(table)
    aliases = [
        name
        for name in catalog.voice_names(engine.name)
        if name not in {v.id for v in engine.voices()}
    ]
    console.print(f"aliases: {', '.join(aliases)}")


@app.command("search")
def voices_search(
    language: Annotated[
        str | None, typer.Option(help="BCP 47 language: de (any German), en-GB (British only).")
    ] = None,
    engine: Annotated[str | None, typer.Option(help="piper, kokoro or pocket.")] = None,
) -> None:
    """List the voices and models that can be pulled, and whether each is installed."""
    from speechgate.hub import Hub, Index, search

    settings = load_settings()
    found = search(
        Index(Hub.from_settings(settings)),
        settings.models_dir,
        language=language,
        engine=engine,
    )
    table = Table("ref", "language", "quality", "voices", "size", "installed")
    for result in found.results:
        table.add_row(
            result.ref,
            ", ".join(result.languages),
            result.quality or "",
            str(result.voices),
            megabytes(result.size_bytes),
            "yes" if result.installed else "",
        )
    # Rich assumes 80 columns when stdout is not a terminal, too few for the refs.
    out = console if console.is_terminal else Console(width=max(console.width, 120))
    out.print(table)
    for name, message in found.errors.items():
        console.print(f"[yellow]{name}:[/yellow] index unavailable: {message}")
    if not found.results and found.errors:
        raise typer.Exit(1)


@app.command("pull")
def voices_pull(
    refs: Annotated[
        list[str],
        typer.Argument(
            help="piper:<voice key> (e.g. piper:en_US-lessac-medium), kokoro, "
            "pocket:<config> (e.g. pocket:german)."
        ),
    ],
) -> None:
    """Download voices or models by name and install them under the data directory."""
    try:
        pull_refs(load_settings(), refs)
    except SpeechgateError as error:
        console.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(1) from None


def pull_refs(settings: Settings, refs: list[str]) -> None:
    """Pull each of `refs` with a progress bar per file; stops at the first failure."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TransferSpeedColumn,
    )

    from speechgate.hub import FileProgress, Hub, Index, parse_ref, pull

    for ref in refs:
        parse_ref(ref)  # a typo fails before anything is downloaded
    hub = Hub.from_settings(settings)
    index = Index(hub)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=console,
        transient=not console.is_terminal,
    ) as bars:
        tasks: dict[str, Any] = {}

        def show(event: FileProgress) -> None:
            if event.file not in tasks:
                tasks[event.file] = bars.add_task(event.file.rsplit("/", 1)[-1], total=None)
            bars.update(tasks[event.file], completed=event.done, total=event.total)

        for ref in refs:
            item = pull(ref, models=settings.models_dir, hub=hub, progress=show, index=index)
            voices = ", ".join(voice.id for voice in item.manifest.voices[:8])
            more = len(item.manifest.voices) - 8
            bars.console.print(
                f"installed {item.manifest.ref} ({megabytes(item.manifest.size_bytes)}) in "
                f"{item.directory}: {voices}{f' and {more} more' if more > 0 else ''}"
            )
