"""The voice library: cloned voices kept in the data directory, surviving restarts.

Each voice is two files named by its id: `<id>.safetensors`, the engine's speaker state (the
one engine that clones, pocket-tts, exports safetensors and reads them back by that suffix),
and `<id>.json`, its metadata, written last so that a voice exists only once both are
complete. Ids are generated here and checked against their pattern before any lookup, so no
client string ever becomes a path.

Not thread-safe: the gateway uses it from its event loop (file work in a thread, one at a time
per voice).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import tempfile
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


class VoiceNotStored(NotFound):
    default_code = "voice_not_found"

    def __init__(self, voice_id: str) -> None:
        super().__init__(f"No stored voice with id {voice_id!r}.", param="voice_id")


class VoiceLibrary:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._voices: dict[str, StoredVoice] = {}
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

    def list(self) -> list[StoredVoice]:
        """Every stored voice, oldest first."""
        return sorted(self._voices.values(), key=lambda voice: (voice.created_at, voice.id))

    def get(self, voice_id: str) -> StoredVoice:
        voice = self._voices.get(voice_id) if _ID.fullmatch(voice_id) else None
        if voice is None:
            raise VoiceNotStored(voice_id)
        return voice

    def find(self, name_or_id: str) -> StoredVoice | None:
        """The voice with this id, or else this name (compared as catalog names are)."""
        if name_or_id in self._voices:
            return self._voices[name_or_id]
        wanted = normalize(name_or_id)
        return next((v for v in self._voices.values() if normalize(v.name) == wanted), None)

    def state_path(self, voice: StoredVoice) -> Path:
        return self.directory / f"{voice.id}.safetensors"

    def add(self, name: str, engine: str, state: bytes, prompt_seconds: float) -> StoredVoice:
        """Store a new voice; raises Conflict if the name is taken."""
        if self.find(name) is not None:
            raise Conflict(f"A voice named {name!r} already exists.", param="name")
        voice = StoredVoice(
            id=f"voice_{secrets.token_hex(12)}",
            name=name,
            engine=engine,
            created_at=int(time.time()),
            prompt_seconds=round(prompt_seconds, 3),
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        _write_atomically(self.state_path(voice), state)
        _write_atomically(self._metadata_path(voice), json.dumps(asdict(voice)).encode())
        self._voices[voice.id] = voice
        return voice

    def delete(self, voice_id: str) -> StoredVoice:
        voice = self.get(voice_id)
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
