"""What can be pulled, from the indexes the projects publish.

Piper's `voices.json` at a pinned tag, the hub's listing of Kokoro-82M's ONNX repository, and
the configs pocket-tts ships (read as files: importing pocket-tts imports torch). An `Index`
caches what it fetched for its lifetime: make one per command or request.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from speechgate.engines.kokoro import INSTALLED_NAME as KOKORO_ITEM
from speechgate.engines.kokoro import KOKORO_VOICE, kokoro_gender, kokoro_language
from speechgate.engines.pocket import POCKET_GENDERS, pocket_config_language
from speechgate.errors import NotPullable
from speechgate.hub.client import Hub, RemoteFile
from speechgate.hub.refs import KOKORO, PIPER, POCKET, make_ref, parse_ref
from speechgate.voices.installed import InstalledVoice
from speechgate.voices.naming import language_tag

PIPER_REPO = "rhasspy/piper-voices"
PIPER_REVISION = "v1.0.0"
KOKORO_REPO = "onnx-community/Kokoro-82M-v1.0-ONNX"
KOKORO_REVISION = "main"
# The int8 graph, whose inputs (input_ids, style, speed) kokoro-onnx 0.6.1 runs.
KOKORO_GRAPH = "onnx/model_quantized.onnx"
# pocket_tts.utils.utils.get_predefined_voice's repository and revision (a test checks that
# they still agree with the installed pocket-tts).
POCKET_VOICES_REPO = "kyutai/pocket-tts-without-voice-cloning"
POCKET_VOICES_REVISION = "a7056f505a4a8ca72d8b5fb1440071d6f1a35739"


@dataclass(frozen=True)
class Pullable:
    """One item that can be pulled; `files` maps each role in the installed item to its hub
    file, `extra` carries what the engine's assembly needs."""

    ref: str
    engine: str
    name: str
    languages: tuple[str, ...]
    quality: str | None
    voices: tuple[InstalledVoice, ...]
    files: dict[str, RemoteFile]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def size_bytes(self) -> int | None:
        sizes = [file.size for file in self.files.values()]
        return None if any(size is None for size in sizes) else sum(s or 0 for s in sizes)


def piper_voice_ids(key: str, speakers: dict[str, int] | None) -> list[str]:
    """The voice ids of a Piper model: its key, or `<key>#<speaker>` per speaker."""
    if not speakers or len(speakers) < 2:
        return [key]
    return [f"{key}#{speaker}" for speaker in sorted(speakers, key=lambda s: speakers[s])]


def pocket_configs_dir() -> Path | None:
    """pocket-tts' packaged configs, found without importing pocket-tts (it imports torch)."""
    spec = importlib.util.find_spec("pocket_tts")
    if spec is None or not spec.submodule_search_locations:
        return None
    configs = Path(next(iter(spec.submodule_search_locations))) / "config"
    return configs if configs.is_dir() else None


def parse_hf_uri(uri: str) -> RemoteFile:
    owner, repo, path = uri.removeprefix("hf://").split("/", 2)
    path, _, revision = path.partition("@")
    return RemoteFile(f"{owner}/{repo}", path, revision or "main")


class Index:
    """The pullable items of every engine, fetched on first use and kept."""

    def __init__(self, hub: Hub, pocket_configs: Path | None = None) -> None:
        self.hub = hub
        self.pocket_configs = pocket_configs if pocket_configs else pocket_configs_dir()
        self._lock = threading.Lock()
        self._listings: dict[tuple[str, str], dict[str, RemoteFile]] = {}
        self._piper: dict[str, Pullable] | None = None
        self._kokoro: Pullable | None = None

    def find(self, ref: str) -> Pullable:
        engine, name = parse_ref(ref)
        item: Pullable | None = None
        if engine == PIPER:
            item = self.piper().get(name)
        elif engine == KOKORO:
            item = self.kokoro()
        elif engine == POCKET and name in self.pocket_names():
            item = self.pocket(name)
        if item is None:
            raise NotPullable(
                f"Nothing to pull under {ref!r}: `speechgate voices search` lists what can be "
                "pulled.",
                param="ref",
            )
        return item

    def engines(self) -> dict[str, Callable[[], list[Pullable]]]:
        return {
            PIPER: lambda: list(self.piper().values()),
            KOKORO: lambda: [self.kokoro()],
            POCKET: lambda: [self.pocket(name) for name in self.pocket_names()],
        }

    # --- Piper ---

    def piper(self) -> dict[str, Pullable]:
        with self._lock:
            if self._piper is None:
                index = self.hub.fetch(RemoteFile(PIPER_REPO, "voices.json", PIPER_REVISION))
                entries = json.loads(index.read_text(encoding="utf-8"))
                self._piper = dict(self._piper_items(entries))
            return self._piper

    def _piper_items(self, entries: dict[str, Any]) -> Iterator[tuple[str, Pullable]]:
        for key, entry in sorted(entries.items()):
            files: dict[str, RemoteFile] = {}
            for path, info in entry.get("files", {}).items():
                role = (
                    "model"
                    if path.endswith(".onnx")
                    else "config"
                    if path.endswith(".onnx.json")
                    else None
                )
                if role:
                    files[role] = RemoteFile(
                        PIPER_REPO,
                        path,
                        PIPER_REVISION,
                        size=info.get("size_bytes"),
                        md5=info.get("md5_digest"),
                    )
            if set(files) != {"model", "config"}:
                continue
            code = entry.get("language", {}).get("code")
            language = language_tag(code) if code else None
            quality = entry.get("quality")
            voices = tuple(
                InstalledVoice(id=voice, language=language, quality=quality)
                for voice in piper_voice_ids(key, entry.get("speaker_id_map"))
            )
            yield (
                key,
                Pullable(
                    ref=make_ref(PIPER, key),
                    engine=PIPER,
                    name=key,
                    languages=(language,) if language else (),
                    quality=quality,
                    voices=voices,
                    files=files,
                    extra={"language": entry.get("language", {})},
                ),
            )

    # --- Kokoro ---

    def kokoro(self) -> Pullable:
        with self._lock:
            if self._kokoro is None:
                listing = self.hub.list_files(KOKORO_REPO, KOKORO_REVISION)
                by_path = {file.path: file for file in listing}
                if KOKORO_GRAPH not in by_path:
                    raise NotPullable(
                        f"{KOKORO_REPO} has no {KOKORO_GRAPH} at {KOKORO_REVISION}", param="ref"
                    )
                files = {"model": by_path[KOKORO_GRAPH]}
                voices = []
                for file in listing:
                    voice = Path(file.path).stem
                    if (
                        file.path.startswith("voices/")
                        and file.path.endswith(".bin")
                        and KOKORO_VOICE.fullmatch(voice)
                    ):
                        files[f"voice:{voice}"] = file
                        voices.append(
                            InstalledVoice(
                                id=voice,
                                language=kokoro_language(voice),
                                gender=kokoro_gender(voice),
                            )
                        )
                voices.sort(key=lambda v: v.id)
                self._kokoro = Pullable(
                    ref=KOKORO,
                    engine=KOKORO,
                    name=KOKORO_ITEM,
                    languages=tuple(sorted({v.language for v in voices if v.language})),
                    quality=None,
                    voices=tuple(voices),
                    files=files,
                )
            return self._kokoro

    # --- pocket-tts ---

    def pocket_names(self) -> list[str]:
        if self.pocket_configs is None:
            return []
        return sorted(path.stem for path in self.pocket_configs.glob("*.yaml"))

    def pocket(self, config: str) -> Pullable:
        assert self.pocket_configs is not None
        text = (self.pocket_configs / f"{config}.yaml").read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        weights_uri = data.get("weights_path_without_voice_cloning") or data.get("weights_path")
        tokenizer_uri = data.get("flow_lm", {}).get("lookup_table", {}).get("tokenizer_path")
        if not (isinstance(weights_uri, str) and weights_uri.startswith("hf://")):
            raise NotPullable(f"pocket config {config!r} names no weights on the hub")
        files = {"weights": self._known(parse_hf_uri(weights_uri))}
        if isinstance(tokenizer_uri, str) and tokenizer_uri.startswith("hf://"):
            files["tokenizer"] = self._known(parse_hf_uri(tokenizer_uri))
        language = pocket_config_language(config)
        prefix = f"languages/{config}/embeddings/"
        voices = []
        for path, file in sorted(self._listing(POCKET_VOICES_REPO, POCKET_VOICES_REVISION).items()):
            if path.startswith(prefix) and path.endswith(".safetensors"):
                voice = Path(path).stem
                files[f"embedding:{voice}"] = file
                voices.append(
                    InstalledVoice(id=voice, language=language, gender=POCKET_GENDERS.get(voice))
                )
        return Pullable(
            ref=make_ref(POCKET, config),
            engine=POCKET,
            name=config,
            languages=(language,) if language else (),
            quality=None,
            voices=tuple(voices),
            files=files,
            extra={"config": data},
        )

    def _known(self, file: RemoteFile) -> RemoteFile:
        return self._listing(file.repo, file.revision).get(file.path, file)

    def _listing(self, repo: str, revision: str) -> dict[str, RemoteFile]:
        with self._lock:
            if (repo, revision) not in self._listings:
                files = self.hub.list_files(repo, revision)
                self._listings[repo, revision] = {file.path: file for file in files}
            return self._listings[repo, revision]
