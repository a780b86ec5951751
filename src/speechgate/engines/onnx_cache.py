"""Where the optimized copies of the ONNX models that engines load are kept.

Optimizing the graph is most of a worker's start, once per session; a session on the saved
optimized graph starts several times faster and computes the same audio bit for bit.

A copy is named after its source's bytes (a digest: a model rewritten with the same bytes
changes its mtime), the change made to it, onnxruntime's version and the CPU, since the saved
graph may use kernels laid out for this CPU. Older copies of a source are removed when a new
one is kept. One worker makes the copy holding `lock_path`; the others wait, and load copies
holding it shared, so no copy is removed under them.
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


def cached_model(data_dir: Path, model: Path, variant: str) -> Path:
    """Where the optimized copy of `model`, changed as `variant` says, is kept under
    `data_dir`; the file may not exist yet."""
    model = model.resolve()
    stat = model.stat()
    source = _digest(str(model), variant, _cpu_identity())
    content = _content_digest(model, stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    version = _digest(content, onnxruntime.__version__)
    return data_dir / DIRECTORY / f"{model.stem}-{source}-{version}.onnx"


def lock_path(copy: Path) -> Path:
    """The lock that one source's copies are made and removed under (exclusive) and loaded
    under (shared)."""
    stem, source, _ = copy.stem.rsplit("-", 2)
    return copy.with_name(f".{stem}-{source}.lock")


def writing_path(copy: Path) -> Path | None:
    """A file beside `copy` to save the optimized graph to (then `keep` it), or None when the
    directory cannot be made."""
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return copy.with_name(f".{copy.name}.{os.getpid()}.part")


def keep(written: Path, copy: Path) -> None:
    """Make the graph saved to `written` the copy (atomically) and remove the source's older
    copies; call it holding `lock_path(copy)` exclusively."""
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
    """The digest of `model`'s bytes, cached per file identity and times, so a reload does not
    read it again."""
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
