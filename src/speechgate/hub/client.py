"""Downloads from the Hugging Face hub, through huggingface_hub only, verified.

Files land in huggingface_hub's cache, so a pull that stopped half-way fetches only what it
lacks next time; huggingface_hub resumes dropped connections itself. Thread-safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speechgate.errors import (
    ChecksumMismatch,
    InsufficientStorage,
    PullFailed,
    SpeechgateError,
    disk_full,
)

if TYPE_CHECKING:
    from tqdm import tqdm

    from speechgate.settings import Settings


@dataclass(frozen=True)
class RemoteFile:
    """One file of a hub repository, with the checksums its index gives (any may be None)."""

    repo: str
    path: str
    revision: str
    size: int | None = None
    md5: str | None = None
    sha256: str | None = None
    git_sha1: str | None = None
    """The git blob id, for files not in LFS."""


@dataclass(frozen=True)
class FileProgress:
    """Bytes of one file downloaded so far; `total` None when the hub did not say."""

    file: str
    done: int
    total: int | None


Progress = Callable[[FileProgress], None]


def _progress_bar(file: str, report: Progress) -> type[tqdm[Any]]:
    """A tqdm class for huggingface_hub that reports bytes to `report` and draws nothing."""
    from tqdm import tqdm

    class Reporter(tqdm):  # type: ignore[misc]  # tqdm ships no type hints
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            self._done = int(kwargs.get("initial") or 0)
            self._total = kwargs.get("total")
            super().__init__(*args, **kwargs)
            report(FileProgress(file, self._done, self._total))

        def update(self, n: float | None = 1) -> bool | None:
            # n is negative when a server ignored a Range request and the file restarts.
            self._done += int(n or 0)
            report(FileProgress(file, self._done, self._total))
            return None

    return Reporter


class Hub:
    """The hub (or a mirror at `endpoint`) and the local cache downloads go to."""

    def __init__(self, cache_dir: Path, endpoint: str | None = None) -> None:
        self.cache_dir = cache_dir
        self.endpoint = endpoint

    @classmethod
    def from_settings(cls, settings: Settings) -> Hub:
        return cls(settings.hub_cache_dir, settings.hub.endpoint)

    def list_files(self, repo: str, revision: str, path: str | None = None) -> list[RemoteFile]:
        from huggingface_hub import HfApi
        from huggingface_hub.hf_api import RepoFile

        try:
            entries = list(
                HfApi(endpoint=self.endpoint).list_repo_tree(
                    repo, path_in_repo=path, revision=revision, recursive=True
                )
            )
        except Exception as error:
            raise _failed(f"listing {repo}@{revision}", error) from error
        return [
            RemoteFile(
                repo=repo,
                path=entry.path,
                revision=revision,
                size=entry.size,
                sha256=entry.lfs.sha256 if entry.lfs else None,
                git_sha1=None if entry.lfs else entry.blob_id,
            )
            for entry in entries
            if isinstance(entry, RepoFile)
        ]

    def fetch(self, file: RemoteFile, progress: Progress | None = None) -> Path:
        """The local path of `file`, downloaded unless cached, and verified: one that fails is
        deleted from the cache and ChecksumMismatch raised."""
        from huggingface_hub import hf_hub_download

        try:
            local = hf_hub_download(
                file.repo,
                file.path,
                revision=file.revision,
                cache_dir=self.cache_dir,
                endpoint=self.endpoint,
                tqdm_class=_progress_bar(file.path, progress) if progress else None,
            )
        except Exception as error:
            raise _failed(f"downloading {file.repo}/{file.path}", error) from error
        path = Path(local)
        problem = _check(path, file)
        if problem:
            _evict(path)
            raise ChecksumMismatch(
                f"{file.repo}/{file.path}@{file.revision}: {problem}; the file was deleted and "
                "nothing was installed. Pull again; if it fails again, the hub's copy is bad."
            )
        return path

    def snapshot_commit(self, path: Path) -> str:
        for parent in path.parents:
            if parent.parent.name == "snapshots":
                return parent.name
        return ""


def _check(path: Path, file: RemoteFile) -> str | None:
    size = path.stat().st_size
    if file.size is not None and size != file.size:
        return f"{size} bytes where the index says {file.size}"
    wanted = [
        (name, digest, expected)
        for name, digest, expected in (
            ("md5", hashlib.md5, file.md5),
            ("sha256", hashlib.sha256, file.sha256),
        )
        if expected
    ]
    if not wanted and not file.git_sha1:
        return None
    hashes = [(name, digest(), expected) for name, digest, expected in wanted]
    git = hashlib.sha1(f"blob {size}\0".encode()) if file.git_sha1 else None
    with path.open("rb") as stream:
        while block := stream.read(1 << 20):
            for _, running, _ in hashes:
                running.update(block)
            if git is not None:
                git.update(block)
    for name, running, expected in hashes:
        if running.hexdigest() != expected.lower():
            return f"{name} {running.hexdigest()} where the index says {expected}"
    if git is not None and file.git_sha1 and git.hexdigest() != file.git_sha1:
        return f"git blob id {git.hexdigest()} where the hub says {file.git_sha1}"
    return None


def _evict(path: Path) -> None:
    """Delete a cached file: the blob and the snapshot's link to it."""
    blob = path.resolve()
    for victim in (path, blob):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(victim)


def _failed(what: str, error: Exception) -> SpeechgateError:
    if isinstance(error, SpeechgateError):
        return error
    if disk_full(error):  # the hub answered; the cache could not hold what it sent
        return InsufficientStorage(what.capitalize())
    from huggingface_hub.errors import (
        EntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(error, RepositoryNotFoundError | RevisionNotFoundError | EntryNotFoundError):
        return PullFailed(f"{what}: the hub has no such file or repository ({error})")
    reason = str(error).splitlines()[0] if str(error) else type(error).__name__
    return PullFailed(f"{what} failed: {reason}", code="hub_unavailable")
