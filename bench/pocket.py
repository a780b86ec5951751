"""pocket-tts, side by side in one run: the in-process ceiling, speechgate, `pocket-tts serve`.

    .venv/bin/python bench/pocket.py                     # ~12-15 min on 2 cores
    .venv/bin/python bench/pocket.py --seconds 5 --ceiling-seconds 10 --single-seconds 5

The model is pocket-tts' shipped `english` architecture (pocket_tts/config/english.yaml, ~106 M
parameters) with random weights: its real weights, tokenizer and voices are `hf://` entries
that cannot be fetched here, and speed does not depend on the weights. A local BPE tokenizer,
trained on the benchmark texts, stands in for the hub's; the end-of-speech threshold is set so
high that speech never ends early, so every output is pocket-tts' length cap for its text
(token count / 3 + 2 s, per chunk) whichever server speaks it. Every text is one sentence that
both speechgate's segmenter and pocket-tts' chunker keep whole: all three sides generate
exactly the same frames.

Phases, in order: the ceiling's first half (one single-thread process pinned to each core),
one unpinned process, speechgate at 2 workers x 1 core, its default (`--setups 1x2,2x1` adds
1 worker x 2 cores; each setup clones its voice first, timed), `pocket-tts serve` (voice
preloaded, then uploaded with every request), the ceiling's second half. Each server is a
child process on 127.0.0.1, stopped before the next starts; the load comes from `speechgate
bench`'s generator in this process.
Prints one table and writes `results.json` (every request too) and the servers' logs to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import multiprocessing
import os
import string
import sys
import tempfile
import time
import wave
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table

from speechgate.bench import TEXTS as BENCH_TEXTS
from speechgate.bench import (
    LoadConfig,
    RunStats,
    Sample,
    Text,
    baselines,
    child,
    measure_ceiling,
    run_load,
    summarize,
)
from speechgate.bench.comparison import ServerRun, ratio_lines, ratios
from speechgate.bench.inprocess import OUTPUT, EngineJob, InProcessRun, run_processes
from speechgate.engines.base import EngineConfig

# pocket-tts warns on every output that ends at the length cap, which is all of them here.
# Module level, so the spawned in-process benchmark processes (which import this module as
# __mp_main__) are quiet too.
logging.getLogger("pocket_tts").setLevel(logging.ERROR)

RATE = 24000
# Never reached: a random model's end-of-speech logit is noise, and any real threshold would
# end each output at a random point. The length is then pocket-tts' cap for the text.
EOS_THRESHOLD = "1e9"
VOICE = "bench"
VOICE_SECONDS = 5.0
# One sentence each, under speechgate's 100-character first segment and pocket-tts' 50-token
# chunk: neither side splits them, so all generate the same frames (4.4-9.6 s of audio).
TEXTS: tuple[Text, ...] = (
    Text("short", "Hello, how can I help you today?"),
    Text(
        "medium",
        "The quarterly report is ready for review, and revenue grew by eight percent this year.",
    ),
    Text("short", "Your order has shipped."),
    Text(
        "medium", "Turn left at the next intersection, then continue straight for about two miles."
    ),
    Text("short", "Please hold while I check that for you."),
    Text(
        "medium",
        "Before we begin, please make sure your microphone is working and that you are in a "
        "quiet room.",
    ),
    Text("short", "The meeting starts at three o'clock."),
    Text(
        "medium",
        "A light rain is expected this evening, clearing up overnight with a gentle breeze "
        "from the west.",
    ),
)


# --- the model ---------------------------------------------------------------------------


def build_model(root: Path, texts: Sequence[Text] = TEXTS) -> dict[str, Any]:
    """Write `root/config.yaml`: english.yaml's architecture, a local tokenizer, random weights
    saved as safetensors, and the never-reached end-of-speech threshold. Runs in a child
    process (see `main`), so this one never holds torch or a model."""
    import pocket_tts
    import safetensors.torch
    import tokenizers
    import torch
    import yaml
    from pocket_tts import TTSModel

    # Word-level in effect (the vocabulary ends at whole words of TEXTS, punctuation apart):
    # about the token count of the released 4000-piece tokenizer, hence about its length cap.
    # A character-level one would triple every text's cap.
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Sequence(
        [tokenizers.pre_tokenizers.Metaspace(), tokenizers.pre_tokenizers.Punctuation()]
    )
    tokenizer.decoder = tokenizers.decoders.Metaspace()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=4000, special_tokens=["<unk>"], initial_alphabet=list(string.printable[:95])
    )
    tokenizer.train_from_iterator([text.text for text in texts], trainer)
    tokenizer.save(str(root / "tokenizer.json"))

    shipped = Path(pocket_tts.__file__).parent / "config" / "english.yaml"
    config = yaml.safe_load(shipped.read_text())
    for key in ("weights_path", "weights_path_without_voice_cloning"):
        config.pop(key, None)  # hf:// entries; without them the loader initialises at random
    table = config["flow_lm"]["lookup_table"]
    table["n_bins"] = tokenizer.get_vocab_size()
    table["tokenizer_path"] = str(root / "tokenizer.json")
    (root / "random.yaml").write_text(yaml.safe_dump(config))
    torch.manual_seed(0)
    model = TTSModel.load_model(config=root / "random.yaml")
    # Starts at zeros (released weights overwrite it); random, so the voice prompt matters.
    torch.nn.init.normal_(model.flow_lm.speaker_proj_weight, std=0.02)
    safetensors.torch.save_file(model.state_dict(), str(root / "model.safetensors"))
    # In the config too (pocket-tts' `default_eos_threshold`): `pocket-tts serve` has no option
    # for it, and so it loads exactly the model speechgate and the ceiling load.
    config["weights_path"] = str(root / "model.safetensors")
    config["default_eos_threshold"] = float(EOS_THRESHOLD)
    (root / "config.yaml").write_text(yaml.safe_dump(config))

    reloaded = TTSModel.load_model(config=root / "config.yaml")
    conditioner = reloaded.flow_lm.conditioner
    caps = {
        text.text: reloaded._estimate_max_gen_len(conditioner.prepare(text.text).shape[1])
        * 0.08  # seconds per frame at 12.5 Hz
        for text in TEXTS
    }
    return {
        "config": str(root / "config.yaml"),
        "parameters": sum(p.numel() for p in reloaded.parameters()),
        "tokenizer_vocabulary": tokenizer.get_vocab_size(),
        "audio_seconds_per_text": caps,
    }


def write_voice(path: Path) -> Path:
    """A 5 s voice prompt: a 140 Hz harmonic tone, 4 Hz syllable-like swell, never silent (so
    speechgate's speech-energy check counts all of it). Quality is irrelevant here."""
    t = np.arange(int(VOICE_SECONDS * RATE)) / RATE
    tone = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 6))
    samples = 0.25 * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t)) * tone / 2.3
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return path


# --- servers as child processes ----------------------------------------------------------


def clean_env(**extra: str) -> dict[str, str]:
    # Offline: the hub is unreachable here, and pocket-tts would retry it for ~23 s.
    return child.clean_env(HF_HUB_OFFLINE="1", **extra)


# --- runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    group: str  # "in-process", "speechgate 2x1", "pocket-tts serve (preloaded voice)", ...
    label: str  # what `concurrency` means there
    stats: RunStats
    slowest_stream: float | None  # min over ok requests of audio / (latency - TTFA)
    samples: list[Sample]


def stream_speed(sample: Sample) -> float | None:
    """How much faster than real time a response streamed once its audio began: above 1, a
    listener who starts playing at the first audio is never caught up."""
    if not sample.ok or sample.ttfa is None or sample.latency <= sample.ttfa:
        return None
    return sample.audio_seconds / (sample.latency - sample.ttfa)


def make_row(group: str, label: str, stats: RunStats, samples: list[Sample]) -> Row:
    speeds = [s for s in map(stream_speed, samples) if s is not None]
    return Row(group, label, stats, min(speeds) if speeds else None, samples)


def speechgate_runs(
    workers: int,
    cores: int,
    model: dict[str, Any],
    voice: Path,
    work: Path,
    out: Path,
    args: argparse.Namespace,
) -> tuple[list[Row], list[float]]:
    """Serve the model with speechgate, clone the voice (timed), load it at every level."""
    port, name = child.free_port(), f"speechgate {workers}x{cores}"
    options = {"pocket": {"config": model["config"], "eos_threshold": EOS_THRESHOLD}}
    env = clean_env(
        SPEECHGATE_SERVER__HOST="127.0.0.1",
        SPEECHGATE_SERVER__PORT=str(port),
        SPEECHGATE_ENGINES="pocket",
        SPEECHGATE_DEFAULT_ENGINE="pocket",
        SPEECHGATE_ENGINE_OPTIONS=json.dumps(options),
        SPEECHGATE_POOL__WORKERS=str(workers),
        SPEECHGATE_POOL__CORES_PER_WORKER=str(cores),
        SPEECHGATE_DATA_DIR=str(work / f"data-{workers}x{cores}"),
    )
    url = f"http://127.0.0.1:{port}"
    command = [str(Path(sys.executable).parent / "speechgate"), "serve"]
    log = out / f"speechgate-{workers}x{cores}.log"
    with child.child_server(command, env, f"{url}/readyz", log) as pid:
        # The first clone is also the worker's first job (lazy initialisation): cold.
        clones = [clone(url, voice, VOICE)]
        config = LoadConfig(
            url=url,
            model="pocket",
            voice=VOICE,
            levels=args.levels,
            duration=args.seconds,
            texts=TEXTS,
            warmup=workers,
            server_pid=pid,
        )
        runs = asyncio.run(run_load(config))
        clones += [clone(url, voice, f"{VOICE}-{i}") for i in range(1, args.clones + 1)]
    return [make_row(name, "clients", run.stats, run.samples) for run in runs], clones


def clone(url: str, voice: Path, name: str) -> float:
    """Seconds for `POST /v1/audio/voices` with the 5 s prompt (decode, checks, speaker state
    computed by a worker, stored)."""
    files = {"audio_sample": ("voice.wav", voice.read_bytes(), "audio/wav")}
    started = time.monotonic()
    response = httpx.post(
        f"{url}/v1/audio/voices",
        data={"name": name, "model": "pocket"},
        files=files,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    response.raise_for_status()
    return elapsed


def pocket_serve_runs(
    mode: str, model: dict[str, Any], voice: Path, out: Path, args: argparse.Namespace
) -> list[Row]:
    """`pocket-tts serve --config` (it reads the end-of-speech threshold from the config) with
    the voice as its default (state computed once at start-up, as speechgate's stored clone)
    or, `mode == "upload"`, sent as `voice_wav` with every request (encoded every time)."""
    server = baselines.pocket_serve(
        Path(model["config"]), voice, child.free_port(), upload=mode == "upload"
    )
    log = out / f"pocket-tts-serve-{mode}.log"
    env = child.clean_env(**server.env)  # it holds HF_HUB_OFFLINE already
    with child.child_server(server.command, env, server.url + server.ready_path, log) as pid:
        config = LoadConfig(
            url=server.url,
            levels=args.levels,
            duration=args.seconds,
            texts=TEXTS,
            warmup=1,
            server_pid=pid,
        )
        runs = asyncio.run(run_load(config, send=server.send))
    group = (
        f"pocket-tts serve ({'voice_wav per request' if mode == 'upload' else 'preloaded voice'})"
    )
    return [make_row(group, "clients", run.stats, run.samples) for run in runs]


def in_process_engine(model: dict[str, Any]) -> EngineConfig:
    return EngineConfig(
        "pocket", threads=1, options={"config": model["config"], "eos_threshold": EOS_THRESHOLD}
    )


def ceiling_half(model: dict[str, Any], voice: Path, seconds: float) -> InProcessRun:
    # The prompt's path: the engine computes its state once, as a worker does for a clone.
    return measure_ceiling(in_process_engine(model), str(voice), {}, seconds, texts=TEXTS)


def unpinned(model: dict[str, Any], voice: Path, seconds: float) -> InProcessRun:
    """One process, not pinned, one torch thread (pocket-tts' own default)."""
    job = EngineJob(in_process_engine(model), str(voice), {}, seconds, (), TEXTS, OUTPUT)
    return run_processes([job])


# --- report -------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def table(rows: Sequence[Row], ceiling: float, title: str) -> Table:
    result = Table(
        title=title,
        caption="audio s/s = audio seconds per wall second (x real time) · ceiling = 2 pinned "
        "single-thread processes, both halves pooled · slowest stream = min over requests of "
        "audio / (last byte - first audio) · CPU % of the server tree, 100 = one core",
    )
    result.add_column("run", no_wrap=True)
    for column in (
        "conc",
        "ok",
        "429",
        "errors",
        "audio s/s",
        "/ ceiling",
        "TTFA p50 ms",
        "TTFA p99 ms",
        "slowest stream xRT",
        "CPU %",
    ):
        result.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        s = row.stats
        slowest = "-" if row.slowest_stream is None else f"{row.slowest_stream:.2f}"
        result.add_row(
            row.group,
            f"{s.concurrency} {row.label}",
            str(s.completed),
            str(s.rejected),
            ", ".join(f"{k}: {v}" for k, v in s.errors.items()) or "0",
            f"{s.throughput:.2f}",
            f"{s.throughput / ceiling:.2f}" if ceiling else "-",
            _ms(s.ttfa_ms.p50),
            _ms(s.ttfa_ms.p99),
            slowest + ("" if row.slowest_stream is None or row.slowest_stream >= 1 else " (<1)"),
            "-" if s.cpu_percent is None else f"{s.cpu_percent:.0f}",
        )
    return result


def goals(rows: Sequence[Row], single: RunStats, ceiling: RunStats) -> list[str]:
    """Issue #15's ratios for each speechgate setup, as `speechgate bench` prints them; the
    unpinned process (pocket-tts' own threads, free over every core) is the all-threads
    reference."""
    lines = []
    for group in dict.fromkeys(row.group for row in rows if row.group.startswith("speechgate")):
        run = ServerRun(group, [row.stats for row in rows if row.group == group])
        # One ceiling, pooled from the halves around every load (this script's own phases).
        ceilings = {level.concurrency: ceiling.throughput for level in run.levels}
        lines += [f"{group}: {line}" for line in ratio_lines(ratios(run, (), single, ceilings))]
    return lines


def summary(rows: Sequence[Row], ceiling: float, clones: dict[str, list[float]]) -> list[str]:
    lines = []
    gateway = [r for r in rows if r.group.startswith("speechgate")]
    upstream = [r for r in rows if r.group.startswith("pocket-tts serve")]
    best_gateway = max(gateway, key=lambda r: r.stats.throughput, default=None)
    best_upstream = max(upstream, key=lambda r: r.stats.throughput, default=None)
    for label, best in (("speechgate", best_gateway), ("pocket-tts serve", best_upstream)):
        if best is not None and ceiling:
            lines.append(
                f"{label} best: {best.group} at {best.stats.concurrency} clients, "
                f"{best.stats.throughput:.2f} audio s/s = {best.stats.throughput / ceiling:.2f} "
                "x the ceiling"
            )
    if best_gateway and best_upstream and best_upstream.stats.throughput:
        ratio = best_gateway.stats.throughput / best_upstream.stats.throughput
        lines.append(f"speechgate best / pocket-tts serve best = {ratio:.2f}")
    for group in dict.fromkeys(r.group for r in gateway + upstream):
        slow = [
            r.stats.concurrency
            for r in rows
            if r.group == group and (r.slowest_stream is None or r.slowest_stream < 1)
        ]
        lines.append(
            f"{group}: a stream slower than real time at {slow} clients"
            if slow
            else f"{group}: every stream faster than real time"
        )
    for setup, (cold, *warm) in clones.items():
        formatted = ", ".join(f"{s * 1000:.0f}" for s in warm)
        lines.append(
            f"cloning a {VOICE_SECONDS:.0f} s sample, speechgate {setup}: {cold * 1000:.0f} ms "
            f"cold (the worker's first job), then {formatted} ms"
        )
    return lines


# --- main ---------------------------------------------------------------------------------


def _levels(value: str) -> tuple[int, ...]:
    return tuple(int(level) for level in value.split(","))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--levels", type=_levels, default=(1, 2, 4, 8), help="clients")
    parser.add_argument("--seconds", type=float, default=20.0, help="per level (new requests)")
    parser.add_argument("--ceiling-seconds", type=float, default=30.0, help="both halves")
    parser.add_argument("--single-seconds", type=float, default=20.0, help="unpinned process")
    parser.add_argument(
        "--setups",
        default="2x1",
        help="speechgate workers x cores (2x1, one worker per core, is the default "
        "configuration, a lone job widened over both)",
    )
    parser.add_argument(
        "--pocket-voice",
        default="preloaded,upload",
        help="pocket-tts serve runs: preloaded (--default-voice) and/or upload (voice_wav)",
    )
    parser.add_argument("--clones", type=int, default=3, help="warm clones timed per setup")
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    default_out = Path(tempfile.gettempdir()) / "speechgate-bench" / f"{stamp}-pocket"
    parser.add_argument("--out", type=Path, default=default_out)
    parser.add_argument(
        "--prepare",
        type=Path,
        metavar="DIR",
        help="only write the model (its tokenizer also trained on `speechgate bench`'s texts) "
        "and voice.wav into DIR, for `speechgate bench --compare pocket-serve`; see README",
    )
    return parser.parse_args()


def build_in_child(root: Path, texts: Sequence[Text]) -> dict[str, Any]:
    # In a child process, so this one never holds torch or a model.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(build_model, root, texts).result()


def prepare(root: Path) -> None:
    """The model and voice alone, for `speechgate bench`: its texts must tokenize to words too,
    else each would be read letter by letter and run ~3x longer than its real length cap."""
    root.mkdir(parents=True, exist_ok=True)
    voice = write_voice(root / "voice.wav")
    model = build_in_child(root.resolve(), (*TEXTS, *BENCH_TEXTS))
    options = {"pocket": {"config": model["config"], "eos_threshold": EOS_THRESHOLD}}
    print(f"SPEECHGATE_ENGINE_OPTIONS='{json.dumps(options)}'")
    print(f"voice: {voice.resolve()}")


def main() -> None:
    args = parse_args()
    if args.prepare is not None:
        prepare(args.prepare)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    console = Console(width=180, record=True)
    started, load_before = time.monotonic(), os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="speechgate-pocket-bench-") as directory:
        work = Path(directory)
        voice = write_voice(work / "voice.wav")
        with console.status("building the model (english architecture, random weights)"):
            model = build_in_child(work, TEXTS)
        console.print(
            f"model: {model['parameters'] / 1e6:.1f} M parameters, tokenizer "
            f"{model['tokenizer_vocabulary']} pieces; audio per text (s): "
            + ", ".join(f"{s:.2f}" for s in model["audio_seconds_per_text"].values())
        )
        rows: list[Row] = []
        clones: dict[str, list[float]] = {}
        half = args.ceiling_seconds / 2
        with console.status(f"ceiling, first half: {half:.0f} s"):
            before = ceiling_half(model, voice, half)
        with console.status(f"1 unpinned process: {args.single_seconds:.0f} s"):
            single = unpinned(model, voice, args.single_seconds)
        rows.append(make_row("in-process, 1 unpinned", "process", single.stats, single.samples))
        for setup in args.setups.split(","):
            workers, cores = (int(n) for n in setup.split("x"))
            with console.status(f"speechgate {setup}: {len(args.levels)} levels"):
                runs, clones[setup] = speechgate_runs(
                    workers, cores, model, voice, work, args.out, args
                )
            rows += runs
        for mode in args.pocket_voice.split(","):
            with console.status(f"pocket-tts serve ({mode}): {len(args.levels)} levels"):
                rows += pocket_serve_runs(mode, model, voice, args.out, args)
        with console.status(f"ceiling, second half: {half:.0f} s"):
            after = ceiling_half(model, voice, half)
    pooled = summarize(
        before.stats.concurrency,
        before.samples + after.samples,
        before.stats.wall_seconds + after.stats.wall_seconds,
        None,
    )
    ceiling = pooled.throughput
    rows.insert(0, make_row("in-process ceiling", "pinned", pooled, before.samples + after.samples))
    title = (
        f"pocket-tts english architecture, random weights, WAV 24 kHz, {os.cpu_count()} cores, "
        f"{args.seconds:.0f} s per level"
    )
    console.print(table(rows, ceiling, title))
    console.print(
        f"ceiling {ceiling:.2f} audio s/s (first half {before.stats.throughput:.2f}, "
        f"second half {after.stats.throughput:.2f})"
    )
    lines = goals(rows, single.stats, pooled) + summary(rows, ceiling, clones)
    for line in lines:
        console.print(line)
    console.print(f"{time.monotonic() - started:.0f} s in all")
    results = {
        "arguments": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "load_average": {"start": load_before, "end": os.getloadavg()},
        "model": model,
        "ceiling": {
            "pooled": ceiling,
            "first_half": before.stats.throughput,
            "second_half": after.stats.throughput,
        },
        "clone_seconds": clones,
        "summary": lines,
        "rows": [dataclasses.asdict(row) for row in rows],
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "table.txt").write_text(console.export_text())
    console.print(f"results and server logs: {args.out}")


if __name__ == "__main__":
    main()
