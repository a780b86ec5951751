"""The phrase cache's PCM kept on disk (`Settings.phrase_cache.persist`), so that a restarted
server answers a phrase it rendered before from its first request.

An entry is `<digest>.pcm` (int16 mono samples) and `<digest>.json` (their rate, written last:
an entry a crash cut short has none and is ignored), in a folder per voice, which a deleted
voice takes with it. A `PhraseKey` holds what is not written out (a lexicon), so an entry is
found by `digest`, of the key and of the voice's version: audio of a voice replaced or
re-installed since is never found again. Entries are read at start-up, the newest first, and
taken by the first request whose key has the digest; the store keeps to the cache's bound in
bytes, the oldest written going first. Its methods block (call them from a thread) and take
turns.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speechgate.audio.pcm import PcmChunk
from speechgate.phrase_cache import PhraseKey
from speechgate.text.lexicon import Lexicon

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredPhrase:
    digest: str
    pcm: PcmChunk


def digest(key: PhraseKey, version: str) -> str:
    """A name for `key`'s audio, the same in every process: its fields and `version` (what
    identifies the voice's files as they are now)."""
    options = key.text_options
    fields = {
        "engine": key.engine,
        "voice": key.voice,
        "voice_id": key.voice_id,
        "owner": key.owner,
        "text": key.text,
        "speed": key.speed,
        "seed": key.seed,
        "instructions": key.instructions,
        "loudness_target": key.loudness_target,
        "engine_options": key.engine_options,
        "version": version,
        "text_options": None
        if options is None
        else {
            "normalize": options.normalize,
            "ssml": options.ssml,
            "language": options.language,
            "lexicon": _lexicon_digest(options.lexicon),
            "phonemes": options.phonemes,
            "engine": options.engine,
            "inline_tags": options.inline_tags,
            "lexicon_param": options.lexicon_param,
        },
    }
    canonical = json.dumps(fields, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@functools.lru_cache(maxsize=64)
def _lexicon_digest(lexicon: Lexicon) -> str:
    # An operator's lexicon is one object for every request: its rules are written out once.
    return hashlib.sha256(repr(lexicon.rules).encode()).hexdigest()


def file_version(path: str) -> str:
    """What changes when the file at `path` is replaced: its size and modification time; ""
    for a path that is no file (a built-in voice's name)."""
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        return ""
    return f"{stat.st_size}:{stat.st_mtime_ns}"


class PhraseStore:
    """Entries under `directory` (created on first write), within `max_bytes` of PCM."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._sizes: OrderedDict[Path, int] = OrderedDict()  # entries, the oldest first
        self.size = 0
        self._lock = threading.Lock()

    def load(self) -> list[StoredPhrase]:
        """The complete entries, the newest first, as many as fit in the bound; the older
        ones that do not are removed."""
        with self._lock:
            return self._load()

    def _load(self) -> list[StoredPhrase]:
        for part in self.directory.glob("*/.*.part"):  # writes a crash cut short
            part.unlink(missing_ok=True)
        found: list[StoredPhrase] = []
        size = 0
        for meta in self._metas_newest_first():
            pcm_path = meta.with_suffix(".pcm")
            try:
                rate = int(json.loads(meta.read_text())["sample_rate"])
                if size + pcm_path.stat().st_size > self.max_bytes:
                    _remove(meta)
                    continue
                samples = np.fromfile(pcm_path, dtype=np.int16)
            except (OSError, ValueError, KeyError, TypeError) as error:
                _log.warning("phrase cache: entry %s unreadable, removed: %s", meta, error)
                _remove(meta)
                continue
            size += samples.nbytes
            found.append(StoredPhrase(meta.stem, PcmChunk(samples, rate)))
            self._sizes[meta] = samples.nbytes
            self._sizes.move_to_end(meta, last=False)
        self.size = size
        return found

    def save(self, digest: str, pcm: PcmChunk, voice_id: str) -> None:
        """Write an entry (replacing one of that digest); a failure (disk full) is logged:
        the phrase is still cached in memory."""
        with self._lock:
            self._save(digest, pcm, voice_id)

    def _save(self, digest: str, pcm: PcmChunk, voice_id: str) -> None:
        folder = self._folder(voice_id)
        meta = folder / f"{digest}.json"
        self._forget(meta)
        if pcm.samples.nbytes > self.max_bytes:
            return
        while self._sizes and self.size + pcm.samples.nbytes > self.max_bytes:
            self._forget(next(iter(self._sizes)))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _write(meta.with_suffix(".pcm"), pcm.samples.astype(np.int16, copy=False).tobytes())
            _write(meta, json.dumps({"sample_rate": pcm.sample_rate}).encode())
        except OSError as error:
            _log.warning("phrase cache: entry %s not written: %s", meta, error)
            _remove(meta)
            return
        self._sizes[meta] = pcm.samples.nbytes
        self.size += pcm.samples.nbytes

    def forget_voice(self, voice_id: str) -> int:
        """Remove the entries spoken with `voice_id`; returns how many."""
        folder = self._folder(voice_id)
        with self._lock:
            gone = [meta for meta in self._sizes if meta.parent == folder]
            for meta in gone:
                self._forget(meta)
            shutil.rmtree(folder, ignore_errors=True)
        return len(gone)

    def _forget(self, meta: Path) -> None:
        self.size -= self._sizes.pop(meta, 0)
        _remove(meta)

    def _folder(self, voice_id: str) -> Path:
        # A voice's id may hold any character (a blend of voices): its folder is named by a hash.
        return self.directory / hashlib.sha256(voice_id.encode()).hexdigest()[:24]

    def _metas_newest_first(self) -> Iterator[Path]:
        metas = []
        for path in self.directory.glob("*/*.json"):
            try:
                metas.append((path.stat().st_mtime_ns, path))
            except OSError:  # removed meanwhile
                continue
        return (path for _, path in sorted(metas, reverse=True))


def _write(path: Path, data: bytes) -> None:
    # Written aside and renamed into place: a reader never sees half a file.
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _remove(meta: Path) -> None:
    # The metadata first: without it, what is left is ignored.
    meta.unlink(missing_ok=True)
    meta.with_suffix(".pcm").unlink(missing_ok=True)
