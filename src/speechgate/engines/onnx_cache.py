"""Where the optimized copies of the ONNX models that engines load are kept.

onnxruntime optimizes a model's graph every time it builds a session on it. That is most of a
worker's start: for Piper joe 0.37 s of CPU and for Kokoro 0.8 s, once per session (a worker
holds one per width), after 0.25 s / 0.38 s more to expose the phoneme durations as an output
(`onnx_session.with_output`). onnxruntime can save the graph it optimized, and a session built
from that file without optimizing starts in 0.08 s / 0.18 s and computes the same audio, bit for
bit (Piper joe: `tests/engines/test_onnx_cache.py`; Kokoro: a sentence rendered by an engine
without a copy, one that made it and one that loaded it, measured once).

A copy is named after its source, the change made to it and the CPU, and after what tells one
version of the source from the next: its bytes (a digest of them; not its modification time,
which a model written again with the same bytes changes) and onnxruntime's version. The saved
graph may use kernels laid out for this CPU (onnxruntime's NCHWc transforms), so a data
directory shared by different machines keeps a copy for each. Copies of a source's older
versions (a voice pulled again, onnxruntime upgraded) are removed when a new one is kept.

Workers of one engine start together on the same data directory: one makes the copy while
holding `lock_path`, the others wait for it and load what it made, and a process loads a copy
only while holding that lock shared, so the copy is not removed under it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
from pathlib import Path

import onnxruntime

DIRECTORY = Path("optimized")
"""Under the engine's data directory."""


def cached_model(data_dir: Path, model: Path, variant: str) -> Path:
    """Where the optimized copy of `model`, changed as `variant` says (any text that tells one
    change from another), is kept under `data_dir`; the file may not exist yet."""
    model = model.resolve()
    stat = model.stat()
    source = _digest(str(model), variant, _cpu_identity())
    content = _content_digest(model, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    version = _digest(content, onnxruntime.__version__)
    return data_dir / DIRECTORY / f"{model.stem}-{source}-{version}.onnx"


def lock_path(copy: Path) -> Path:
    """The lock that the copies of one source, every version of it, are made and removed under
    (exclusive) and loaded under (shared)."""
    stem, source, _ = copy.stem.rsplit("-", 2)
    return copy.with_name(f".{stem}-{source}.lock")


def writing_path(copy: Path) -> Path | None:
    """A file beside `copy` to save the optimized graph to (then `keep` it), or None when the
    directory cannot be made (a read-only data directory: the model is used without a copy)."""
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return copy.with_name(f".{copy.name}.{os.getpid()}.part")


def keep(written: Path, copy: Path) -> None:
    """Make the graph saved to `written` the copy, and remove the source's older copies; call
    it holding `lock_path(copy)` exclusively, so that nobody is loading one of them.

    The rename is atomic: a reader that takes no lock sees one whole file or none."""
    os.replace(written, copy)
    stem, source, _ = copy.stem.rsplit("-", 2)
    for older in copy.parent.glob(f"{stem}-{source}-*.onnx"):
        if older != copy:
            with contextlib.suppress(OSError):
                older.unlink()


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=16)
def _content_digest(model: Path, device: int, inode: int, size: int, mtime_ns: int) -> str:
    """The digest of `model`'s bytes, once per version of the file a process sees (its
    identity and times are the cache's key): a worker that reloads a model does not read it
    again."""
    with model.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


@functools.cache
def _cpu_identity() -> str:
    """The machine and its instruction set extensions (Linux's /proc/cpuinfo flags)."""
    flags = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = line
                break
    return f"{platform.machine()} {platform.processor()} {flags}"
