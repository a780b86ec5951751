"""Voices and models pulled into the data directory (`speechgate voices pull`).

Layout: `<data_dir>/models/<engine>/<name>/` (`Settings.models_dir`) holds one installed item, e.g.
`models/piper/en_US-lessac-medium/`, `models/kokoro/kokoro-v1.0/`, `models/pocket/german/`:
its files, and `manifest.json`, which says what the item is and which voices it brings. An
item is assembled in a temporary directory beside its final place and renamed into place
complete, so an item is installed exactly when its directory (with its manifest) exists: no
reader ever sees half of one.

This module is the contract between the puller (which writes items), the engines (which load
the files a manifest names, in their workers) and the catalog (which lists the voices, in the
gateway, without loading any engine). It imports nothing heavy.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from speechgate.voices.naming import Gender

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
# An item's directory name: no client string becomes a path without passing this.
_ITEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


@dataclass(frozen=True)
class InstalledVoice:
    """One voice an installed item brings.

    `id` is the engine's voice id clients may name (unique within the engine). `language` is a
    BCP 47 tag ("en-US", "de-DE", "ja"); `quality` Piper's x_low/low/medium/high where known.
    """

    id: str
    language: str | None = None
    quality: str | None = None
    gender: Gender | None = None


@dataclass(frozen=True)
class Manifest:
    """What one installed item is.

    `ref` is what `voices pull` was given ("piper:en_US-lessac-medium", "kokoro",
    "pocket:german"); `files` maps each file's role for the engine ("model", "config",
    "voices", ...) to its name inside the item's directory; `source` records where it came from
    (repository, revision, paths and checksums), for `voices search` and for audits.
    """

    ref: str
    engine: str
    name: str
    files: Mapping[str, str]
    voices: tuple[InstalledVoice, ...]
    size_bytes: int
    installed_at: int
    source: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> str:
        data = asdict(self)
        data["files"] = dict(self.files)
        data["source"] = dict(self.source)
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        return cls(
            ref=data["ref"],
            engine=data["engine"],
            name=data["name"],
            files=dict(data["files"]),
            voices=tuple(InstalledVoice(**voice) for voice in data["voices"]),
            size_bytes=int(data["size_bytes"]),
            installed_at=int(data["installed_at"]),
            source=dict(data.get("source", {})),
        )


@dataclass(frozen=True)
class InstalledItem:
    directory: Path
    manifest: Manifest

    def file(self, role: str) -> Path:
        """The path of the file that plays `role` (KeyError if the item has none)."""
        return self.directory / self.manifest.files[role]


# Every function takes `models`, the models directory (`Settings.models_dir`,
# `EngineConfig.models_dir`): `<data_dir>/models`.


def item_dir(models: Path, engine: str, name: str) -> Path:
    if not _ITEM_NAME.fullmatch(engine) or not _ITEM_NAME.fullmatch(name):
        raise ValueError(f"not a valid installed item name: {engine}/{name}")
    return models / engine / name


def installed(models: Path, engine: str | None = None) -> Iterator[InstalledItem]:
    """Every complete item under `models` (of `engine`, if given), in name order.

    Temporary directories of a pull in progress (hidden, leading dot) and items whose manifest
    cannot be read are skipped, the latter with a warning.
    """
    engines = [models / engine] if engine else sorted(p for p in models.glob("*") if p.is_dir())
    for engine_dir in engines:
        if not engine_dir.is_dir():
            continue
        for directory in sorted(engine_dir.iterdir()):
            if directory.name.startswith(".") or not directory.is_dir():
                continue
            try:
                manifest = Manifest.from_json((directory / MANIFEST).read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError, TypeError) as error:
                log.warning("skipping unreadable installed item %s: %s", directory, error)
                continue
            yield InstalledItem(directory, manifest)


def find(models: Path, engine: str, name: str) -> InstalledItem | None:
    """The installed item `engine/name`, if it is installed."""
    for item in installed(models, engine):
        if item.directory.name == name:
            return item
    return None


def install(staging: Path, models: Path, manifest: Manifest) -> InstalledItem:
    """Move a complete item from `staging` (a directory on the same file system, holding every
    file the manifest names) into place, replacing an older copy, and return it.

    The manifest is written into `staging` first, then the directory is renamed: readers see
    the old item or the new one, never a mix.
    """
    for role, name in manifest.files.items():
        if not (staging / name).is_file():
            raise FileNotFoundError(f"{manifest.ref}: the {role} file {name!r} is missing")
    (staging / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
    target = item_dir(models, manifest.engine, manifest.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        # Rename the old copy aside first: a directory cannot be replaced by rename while full.
        old = target.with_name(f".old-{target.name}-{os.getpid()}")
        os.rename(target, old)
        os.rename(staging, target)
        _remove_tree(old)
    else:
        os.rename(staging, target)
    return InstalledItem(target, manifest)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
