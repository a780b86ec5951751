"""onnxruntime sessions for engines that run in a pinned worker."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast, get_args

import onnxruntime

from speechgate.engines.file_lock import file_lock
from speechgate.engines.onnx_cache import cached_model, keep, lock_path, writing_path

log = logging.getLogger(__name__)

Arena = Literal["shared", "session", "off"]
"""Where a session's CPU buffers come from: one arena per process (`shared`), one per session
(`session`, onnxruntime's default), or plain allocations (`off`)."""


@dataclass(frozen=True)
class OnnxOptions:
    """How an engine's sessions use memory, and whether a lone job's wide session lets its
    idle threads spin."""

    memory_pattern: bool = True
    arena: Arena = "session"
    # Off: spinning gained no speed and no earlier first audio for more CPU.
    wide_spinning: bool = False


_shared_arena_registered = False


def _register_shared_arena() -> None:
    global _shared_arena_registered
    if not _shared_arena_registered:
        cpu = onnxruntime.OrtMemoryInfo(
            "Cpu",
            onnxruntime.OrtAllocatorType.ORT_ARENA_ALLOCATOR,
            0,
            onnxruntime.OrtMemType.DEFAULT,
        )
        onnxruntime.create_and_register_allocator(cpu, onnxruntime.OrtArenaCfg({}))
        _shared_arena_registered = True


def pinned_session(
    model: Path | bytes,
    threads: int,
    onnx: OnnxOptions = OnnxOptions(),
    spinning: bool = False,
    *,
    optimized: bool = False,
    save_optimized: Path | None = None,
) -> onnxruntime.InferenceSession:
    """A CPU session on exactly `threads` threads, on a model file or serialized model;
    libraries' own loaders would use every core, and a pinned worker must use its own.

    `save_optimized` writes the optimized graph to that file; `optimized` says `model` is one.
    With a new input shape on every sentence, the memory pattern's plans and an arena's cached
    blocks grow the process by hundreds of megabytes, so each engine chooses `onnx`.
    """
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_mem_pattern = onnx.memory_pattern
    options.enable_cpu_mem_arena = onnx.arena != "off"
    if onnx.arena == "shared":
        _register_shared_arena()
        options.add_session_config_entry("session.use_env_allocators", "1")
    # Spinning threads on shared cores would steal them from the next job and other workers.
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    if optimized:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    if save_optimized is not None:
        options.optimized_model_filepath = str(save_optimized)
        # Not its warning that the saved graph may hold this CPU's kernels: the name says which.
        options.log_severity_level = 3
    return onnxruntime.InferenceSession(
        model if isinstance(model, bytes) else str(model),
        sess_options=options,
        providers=["CPUExecutionProvider"],
    )


class Runs:
    """The onnxruntime runs under way in a process, so another thread can end them: `stop`
    ends them at their next node, and every run that starts, until `allow`, so a cancelled
    job's sentence (up to seconds) does not keep its cores. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._under_way: set[onnxruntime.RunOptions] = set()
        self._stopped = False

    @property
    def under_way(self) -> int:
        with self._lock:
            return len(self._under_way)

    @property
    def stopped(self) -> bool:
        with self._lock:
            return self._stopped

    @contextlib.contextmanager
    def options(self) -> Iterator[onnxruntime.RunOptions]:
        options = onnxruntime.RunOptions()
        with self._lock:
            options.terminate = self._stopped
            self._under_way.add(options)
        try:
            yield options
        finally:
            with self._lock:
                self._under_way.discard(options)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            for options in self._under_way:
                options.terminate = True

    def allow(self) -> None:
        with self._lock:
            self._stopped = False


RUNS = Runs()


class _StoppableSession:
    """An `InferenceSession` whose every run is one of `runs`."""

    def __init__(self, session: onnxruntime.InferenceSession, runs: Runs) -> None:
        self._session = session
        self._runs = runs

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: onnxruntime.RunOptions | None = None,
    ) -> Any:
        if run_options is not None:
            return self._session.run(output_names, input_feed, run_options)
        with self._runs.options() as options:
            return self._session.run(output_names, input_feed, options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def stoppable(
    session: onnxruntime.InferenceSession, runs: Runs = RUNS
) -> onnxruntime.InferenceSession:
    return cast(onnxruntime.InferenceSession, _StoppableSession(session, runs))


@dataclass(frozen=True)
class ExtraOutput:
    """A model's one `op_type` node (or the one named `name`), to be made a graph output."""

    op_type: str
    name: str | None = None
    output: str | None = None


def with_output(model: Path, extra: ExtraOutput) -> bytes | None:
    """`model` serialized with `extra` as an extra graph output, or None without that node:
    TTS graphs compute phoneme durations but published exports output only audio."""
    import onnx

    graph = onnx.load(str(model))
    found = [
        node
        for node in graph.graph.node
        if node.op_type == extra.op_type and (extra.name is None or node.name == extra.name)
    ]
    if len(found) != 1:
        return None
    tensor = found[0].output[0]
    if extra.output is not None:
        graph.graph.node.append(onnx.helper.make_node("Identity", [tensor], [extra.output]))
        tensor = extra.output
    graph.graph.output.append(onnx.ValueInfoProto(name=tensor))
    return bytes(graph.SerializeToString())


def onnx_options(engine: str, options: Mapping[str, str], default: OnnxOptions) -> OnnxOptions:
    """An engine's `OnnxOptions` from its options `memory_pattern`, `wide_spinning` and
    `cpu_arena`, with `default` for those not given."""
    arena = default.arena
    given = options.get("cpu_arena")
    if given is not None:
        value = {"true": "session", "false": "off"}.get(given.lower(), given.lower())
        if value not in get_args(Arena):
            raise ValueError(
                f"{engine} option cpu_arena must be one of {list(get_args(Arena))}, not {given!r}"
            )
        arena = value  # type: ignore[assignment]
    return OnnxOptions(
        _flag(engine, options, "memory_pattern", default.memory_pattern),
        arena,
        _flag(engine, options, "wide_spinning", default.wide_spinning),
    )


def _flag(engine: str, options: Mapping[str, str], name: str, default: bool) -> bool:
    given = options.get(name)
    if given is None:
        return default
    if given.lower() not in ("true", "false"):
        raise ValueError(f"{engine} option {name} must be 'true' or 'false'")
    return given.lower() == "true"


class WidthSessions:
    """One model's sessions, one per thread count a job may be given (`EngineConfig.widths`),
    as onnxruntime fixes a session's threads when it is built; each holds the weights."""

    def __init__(
        self,
        model: Path,
        widths: tuple[int, ...],
        onnx: OnnxOptions,
        extra: ExtraOutput | None = None,
        data_dir: Path | None = None,
    ) -> None:
        """Sessions on `model`, with `extra` as an output if it has that node; with a
        `data_dir`, from the optimized copy kept there."""
        self._onnx = onnx
        self._narrowest = min(widths)
        copy = cached_model(data_dir, model, repr(extra)) if data_dir is not None else None
        self._by_width = self._build(model, widths, extra, copy)
        self.current = self._by_width[self._narrowest]

    def use(self, threads: int) -> onnxruntime.InferenceSession:
        fitting = [width for width in self._by_width if width <= threads] or [min(self._by_width)]
        self.current = self._by_width[max(fitting)]
        return self.current

    def _build(
        self, model: Path, widths: tuple[int, ...], extra: ExtraOutput | None, copy: Path | None
    ) -> dict[int, onnxruntime.InferenceSession]:
        """A session of each width on `copy`, the optimized copy of `model`, making it first if
        it is missing or does not load."""
        if copy is not None:
            with file_lock(lock_path(copy), shared=True):
                loaded = self._load_copy(model, copy, widths)
            if loaded is not None:
                return loaded
        written = writing_path(copy) if copy is not None else None
        if copy is None or written is None:
            return self._plain(model, widths, extra)
        with file_lock(lock_path(copy)):
            loaded = self._load_copy(model, copy, widths)
            if loaded is not None:
                return loaded
            copy.unlink(missing_ok=True)
            source = (with_output(model, extra) if extra is not None else None) or model
            first, *others = widths
            try:
                sessions = {first: self._session(source, first, save=written)}
                keep(written, copy)
            except Exception as error:  # a full disk, say; a broken model fails again below
                written.unlink(missing_ok=True)
                log.warning("no optimized copy of %s: %s", model, error)
                return {width: self._session(source, width) for width in widths}
            wider = {width: self._session(copy, width, optimized=True) for width in others}
            return sessions | wider

    def _load_copy(
        self, model: Path, copy: Path, widths: tuple[int, ...]
    ) -> dict[int, onnxruntime.InferenceSession] | None:
        if not copy.exists():
            return None
        try:
            return {width: self._session(copy, width, optimized=True) for width in widths}
        except Exception as error:  # onnxruntime raises its own kinds of error
            log.warning("making the optimized copy of %s again: %s", model, error)
            return None

    def _plain(
        self, model: Path, widths: tuple[int, ...], extra: ExtraOutput | None
    ) -> dict[int, onnxruntime.InferenceSession]:
        source = (with_output(model, extra) if extra is not None else None) or model
        return {width: self._session(source, width) for width in widths}

    def _session(
        self, source: Path | bytes, width: int, optimized: bool = False, save: Path | None = None
    ) -> onnxruntime.InferenceSession:
        spinning = self._onnx.wide_spinning and width > self._narrowest
        return stoppable(
            pinned_session(
                source, width, self._onnx, spinning, optimized=optimized, save_optimized=save
            )
        )
