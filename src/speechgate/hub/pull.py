"""Pull one item: download its files (verified), assemble it in a staging directory beside
its final place, and install it (`speechgate.voices.installed.install`, an atomic rename).

A failure at any step deletes the staging directory and leaves installed items as they were.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from speechgate.errors import InsufficientStorage, disk_full
from speechgate.hub.client import Hub, Progress
from speechgate.hub.index import Index, Pullable
from speechgate.hub.refs import KOKORO, PIPER, POCKET
from speechgate.voices.installed import InstalledItem, Manifest, install, item_dir

# Kokoro's style vectors: one 256-float row per input length (510 of them in v1.0).
_KOKORO_STYLE = 256


def pull(
    ref: str,
    *,
    models: Path,
    hub: Hub,
    progress: Progress | None = None,
    index: Index | None = None,
) -> InstalledItem:
    """Download and install the item `ref` names under `models`, replacing an older copy.
    Raises NotPullable, PullFailed or ChecksumMismatch. Blocking."""
    index = index or Index(hub)
    item = index.find(ref)
    return install_pullable(item, models=models, hub=hub, progress=progress)


def install_pullable(
    item: Pullable, *, models: Path, hub: Hub, progress: Progress | None = None
) -> InstalledItem:
    downloads = {role: hub.fetch(file, progress) for role, file in item.files.items()}
    target = item_dir(models, item.engine, item.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Beside the target: the same file system, so install's rename is atomic.
    staging = target.parent / f".staging-{item.name}-{uuid.uuid4().hex[:8]}"
    try:
        staging.mkdir()
        files = _ASSEMBLERS[item.engine](item, downloads, staging, target)
        manifest = Manifest(
            ref=item.ref,
            engine=item.engine,
            name=item.name,
            files=files,
            voices=item.voices,
            size_bytes=sum((staging / name).stat().st_size for name in files.values()),
            installed_at=int(time.time()),
            source=_source(item, hub, downloads),
        )
        return install(staging, models, manifest)
    except OSError as error:
        if disk_full(error):
            raise InsufficientStorage(f"Installing {item.ref}") from error
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _source(item: Pullable, hub: Hub, downloads: dict[str, Path]) -> dict[str, object]:
    extra: dict[str, object] = {}
    if item.engine == POCKET:
        # The ungated weights, without voice cloning.
        extra["voice_cloning"] = False
    return {
        **extra,
        "hub": hub.endpoint or "default",
        "files": {
            role: {
                "repo": file.repo,
                "path": file.path,
                "revision": file.revision,
                "commit": hub.snapshot_commit(downloads[role]),
                **{k: v for k, v in (("md5", file.md5), ("sha256", file.sha256)) if v},
            }
            for role, file in item.files.items()
        },
    }


def _place(source: Path, target: Path) -> None:
    """Put a cached file into staging: a hard link where possible (no second copy of a
    model), else a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source.resolve(), target)
    except OSError:
        shutil.copyfile(source, target)


def _piper(item: Pullable, downloads: dict[str, Path], staging: Path, _: Path) -> dict[str, str]:
    files = {"model": f"{item.name}.onnx", "config": f"{item.name}.onnx.json"}
    for role, name in files.items():
        _place(downloads[role], staging / name)
    return files


def _kokoro(item: Pullable, downloads: dict[str, Path], staging: Path, _: Path) -> dict[str, str]:
    """The graph, and every voice's `.bin` (raw float32 style rows) joined into one `.npz`
    shaped like kokoro-onnx's `voices-v1.0.bin`: one (rows, 1, 256) array per voice."""
    import numpy as np

    _place(downloads["model"], staging / "model.onnx")
    arrays: dict[str, Any] = {}
    for role, path in downloads.items():
        if role.startswith("voice:"):
            raw = np.fromfile(path, dtype="<f4")
            if raw.size == 0 or raw.size % _KOKORO_STYLE:
                raise ValueError(f"{path.name}: not a Kokoro voice ({raw.size} floats)")
            arrays[role.removeprefix("voice:")] = raw.reshape(-1, 1, _KOKORO_STYLE)
    np.savez(staging / "voices.npz", **arrays)
    return {"model": "model.onnx", "voices": "voices.npz"}


def _pocket(
    item: Pullable, downloads: dict[str, Path], staging: Path, target: Path
) -> dict[str, str]:
    """The weights (ungated: without voice cloning), tokenizer and embeddings, with the
    packaged config rewritten to their installed paths, so the model loads offline."""
    files = {"config": "config.yaml", "weights": "model.safetensors"}
    _place(downloads["weights"], staging / files["weights"])
    config = dict(item.extra["config"])
    config["weights_path"] = str(target / files["weights"])
    config.pop("weights_path_without_voice_cloning", None)
    if "tokenizer" in downloads:
        files["tokenizer"] = "tokenizer" + "".join(Path(item.files["tokenizer"].path).suffixes)
        _place(downloads["tokenizer"], staging / files["tokenizer"])
        flow_lm = dict(config["flow_lm"])
        flow_lm["lookup_table"] = {
            **flow_lm["lookup_table"],
            "tokenizer_path": str(target / files["tokenizer"]),
        }
        config["flow_lm"] = flow_lm
    for role, path in downloads.items():
        if role.startswith("embedding:"):
            name = f"embeddings/{role.removeprefix('embedding:')}.safetensors"
            _place(path, staging / name)
            files[role] = name
    (staging / files["config"]).write_text(
        yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    return files


_ASSEMBLERS: dict[str, Callable[[Pullable, dict[str, Path], Path, Path], dict[str, str]]] = {
    PIPER: _piper,
    KOKORO: _kokoro,
    POCKET: _pocket,
}
