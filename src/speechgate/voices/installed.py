"""Voices and models pulled into the data directory (`speechgate voices pull`).

`<models>/<engine>/<name>/` holds one item: its files and `manifest.json`, which says what it
is and which voices it brings. An item is assembled beside its place and renamed in complete,
so no reader sees half of one. This is the contract between the puller, the engines and the
catalog, so it imports nothing heavy.
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
# No client string becomes a path without passing this.
_ITEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


@dataclass(frozen=True)
class InstalledVoice:
    """One voice an installed item brings; `id` is unique within the engine."""

    id: str
    language: str | None = None
    quality: str | None = None
    gender: Gender | None = None


@dataclass(frozen=True)
class Manifest:
    """What one installed item is: `ref` is what `voices pull` was given, `files` maps each
    file's role ("model", "config") to its name, `source` records where it came from."""

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
        return self.directory / self.manifest.files[role]


def item_dir(models: Path, engine: str, name: str) -> Path:
    if not _ITEM_NAME.fullmatch(engine) or not _ITEM_NAME.fullmatch(name):
        raise ValueError(f"not a valid installed item name: {engine}/{name}")
    return models / engine / name


def installed(models: Path, engine: str | None = None) -> Iterator[InstalledItem]:
    """Every complete item under `models` (of `engine`, if given), in name order; an unreadable
    manifest is skipped with a warning."""
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
    for item in installed(models, engine):
        if item.directory.name == name:
            return item
    return None


def install(staging: Path, models: Path, manifest: Manifest) -> InstalledItem:
    """Move a complete item from `staging` (on the same file system) into place, replacing an
    older copy: readers see the old item or the new one, never a mix."""
    for role, name in manifest.files.items():
        if not (staging / name).is_file():
            raise FileNotFoundError(f"{manifest.ref}: the {role} file {name!r} is missing")
    (staging / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
    target = item_dir(models, manifest.engine, manifest.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        # A directory cannot be replaced by rename while full.
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
