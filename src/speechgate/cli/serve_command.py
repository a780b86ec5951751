"""`speechgate serve`: the HTTP server (and the Wyoming one beside it, if asked)."""

from __future__ import annotations

from typing import Annotated

import typer

from speechgate.cli.common import console, load_settings
from speechgate.cli.voices_command import pull_refs
from speechgate.errors import SpeechgateError


def serve(
    host: Annotated[str | None, typer.Option(help="Listen address [default: 127.0.0.1].")] = None,
    port: Annotated[int | None, typer.Option(help="Listen port [default: 8000].")] = None,
    engine: Annotated[
        list[str] | None,
        typer.Option(help="Engine to load (repeatable) [default: the installed ones]."),
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes per engine.")] = None,
    default_engine: Annotated[str | None, typer.Option(help="Engine behind tts-1 etc.")] = None,
    backend: Annotated[
        str | None, typer.Option(help="Where engines run: local or ray [default: local].")
    ] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="Ray cluster to join [default: start a local one].")
    ] = None,
    pull: Annotated[
        list[str] | None,
        typer.Option(help="Pull this voice or model first, if not installed (repeatable)."),
    ] = None,
    wyoming: Annotated[
        str | None,
        typer.Option(
            help="Also serve Home Assistant's Wyoming protocol, e.g. tcp://127.0.0.1:10200."
        ),
    ] = None,
    wyoming_zeroconf: Annotated[
        bool | None,
        typer.Option(
            "--wyoming-zeroconf",
            help="Advertise the Wyoming server over zeroconf, for Home Assistant to discover.",
        ),
    ] = None,
    log_format: Annotated[
        str | None,
        typer.Option(help="Log lines as text, or as json objects [default: text]."),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(help="Lowest level logged: debug, info, warning, error [default: info]."),
    ] = None,
    preload: Annotated[
        list[str] | None,
        typer.Option(
            help="Render this phrase into the phrase cache at start-up (repeatable; "
            "SPEECHGATE_PHRASE_CACHE__PRELOAD_VOICES says in which voices)."
        ),
    ] = None,
) -> None:
    """Run the HTTP server. Every setting can also come from SPEECHGATE_* variables."""
    import uvicorn

    from speechgate.api.app import create_app
    from speechgate.logs import configure_logging
    from speechgate.server import server_config

    engines = engine
    settings = load_settings(
        engines=engines,
        default_engine=default_engine or (engines[0] if engines else None),
        server={"host": host, "port": port},
        pool={"workers": workers, "backend": backend},
        ray={"address": ray_address},
        wyoming={"uri": wyoming, "zeroconf": wyoming_zeroconf},
        log={"format": log_format, "level": log_level},
        phrase_cache={"preload": preload},
    )
    if pull:
        from speechgate.hub.refs import parse_ref
        from speechgate.voices.installed import find

        try:
            missing = [ref for ref in pull if find(settings.models_dir, *parse_ref(ref)) is None]
            pull_refs(settings, missing)
        except SpeechgateError as error:
            console.print(f"[red]error:[/red] {error.message}")
            raise typer.Exit(1) from None
    configure_logging(settings.log.format, settings.log.level)
    # Access lines come from speechgate.access, when each request ends (see RequestIdMiddleware);
    # uvicorn's own records go through the handler configured above (log_config=None).
    server = uvicorn.Server(
        server_config(
            create_app(settings),
            settings,
            log_config=None,
            log_level=settings.log.level,
            access_log=False,
        )
    )
    server.run()
    if not server.started:  # start-up failed (uvicorn has logged why)
        raise typer.Exit(3)
