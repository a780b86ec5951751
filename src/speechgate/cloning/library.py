"""The voice library: cloned voices kept in the data directory, surviving restarts.

Each voice is `<id>.safetensors` (the speaker state) and `<id>.json` (its metadata, written
last, so a voice exists only once both are complete). Ids are checked against their pattern
before any lookup, so no client string becomes a path. Thread-safe.

A voice belongs to the key that cloned it (`owner`); every lookup sees only the asker's voices,
`owner=None` (the admin, or a server without keys) every voice.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from speechgate.catalog import normalize
from speechgate.errors import Conflict, NotFound

log = logging.getLogger(__name__)

_ID = re.compile(r"voice_[0-9a-f]{24}")


@dataclass(frozen=True)
class StoredVoice:
    id: str
    name: str
    engine: str
    created_at: int
    prompt_seconds: float
    owner: str | None = None

    def visible_to(self, owner: str | None) -> bool:
        return owner is None or self.owner == owner


class VoiceNotStored(NotFound):
    default_code = "voice_not_found"

    def __init__(self, voice_id: str) -> None:
        super().__init__(f"No stored voice with id {voice_id!r}.", param="voice_id")


class VoiceLibrary:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._voices: dict[str, StoredVoice] = {}
        self._lock = threading.Lock()
        if directory.is_dir():
            for path in sorted(directory.glob("voice_*.json")):
                self._load(path)

    def _load(self, path: Path) -> None:
        try:
            voice = StoredVoice(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as error:
            log.warning("skipping unreadable voice %s: %s", path.name, error)
            return
        if voice.id == path.stem and _ID.fullmatch(voice.id) and self.state_path(voice).is_file():
            self._voices[voice.id] = voice
        else:
            log.warning("skipping voice %s: id or state file missing", path.name)

    def list(self, owner: str | None = None) -> list[StoredVoice]:
        with self._lock:
            voices = [voice for voice in self._voices.values() if voice.visible_to(owner)]
        return sorted(voices, key=lambda voice: (voice.created_at, voice.id))

    def get(self, voice_id: str, owner: str | None = None) -> StoredVoice:
        """The voice with this id; another key's is not found, as if it did not exist."""
        with self._lock:
            voice = self._voices.get(voice_id) if _ID.fullmatch(voice_id) else None
        if voice is None or not voice.visible_to(owner):
            raise VoiceNotStored(voice_id)
        return voice

    def find(self, name_or_id: str, owner: str | None = None) -> StoredVoice | None:
        """The voice `owner` sees with this id, or else this name (the oldest of several)."""
        with self._lock:
            return self._find(name_or_id, owner)

    def _find(self, name_or_id: str, owner: str | None) -> StoredVoice | None:
        voice = self._voices.get(name_or_id)
        if voice is not None:
            return voice if voice.visible_to(owner) else None
        wanted = normalize(name_or_id)
        named = (
            v for v in self._voices.values() if v.visible_to(owner) and normalize(v.name) == wanted
        )
        return min(named, key=lambda v: (v.created_at, v.id), default=None)

    def state_path(self, voice: StoredVoice) -> Path:
        return self.directory / f"{voice.id}.safetensors"

    def add(
        self, name: str, engine: str, state: bytes, prompt_seconds: float, owner: str | None = None
    ) -> StoredVoice:
        """Store a new voice for `owner`; raises Conflict if the name is taken."""
        voice = StoredVoice(
            id=f"voice_{secrets.token_hex(12)}",
            name=name,
            engine=engine,
            created_at=int(time.time()),
            prompt_seconds=round(prompt_seconds, 3),
            owner=owner,
        )
        # Held across the writes: two uploads of one name must not both pass the check.
        with self._lock:
            if self._find(name, owner) is not None:
                raise Conflict(f"A voice named {name!r} already exists.", param="name")
            self.directory.mkdir(parents=True, exist_ok=True)
            _write_atomically(self.state_path(voice), state)
            _write_atomically(self._metadata_path(voice), json.dumps(asdict(voice)).encode())
            self._voices[voice.id] = voice
        return voice

    def delete(self, voice_id: str, owner: str | None = None) -> StoredVoice:
        with self._lock:
            voice = self._voices.get(voice_id) if _ID.fullmatch(voice_id) else None
            if voice is None or not voice.visible_to(owner):
                raise VoiceNotStored(voice_id)
            # Metadata first: a voice half deleted by a crash is then simply absent.
            self._metadata_path(voice).unlink(missing_ok=True)
            self.state_path(voice).unlink(missing_ok=True)
            del self._voices[voice.id]
        return voice

    def _metadata_path(self, voice: StoredVoice) -> Path:
        return self.directory / f"{voice.id}.json"


def _write_atomically(path: Path, data: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(out.name, path)
