"""Pulling Piper voices from a fake hub on loopback, through the real huggingface_hub."""

from __future__ import annotations

import errno
import hashlib
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from speechgate.errors import ChecksumMismatch, InsufficientStorage, InvalidRequest, NotPullable
from speechgate.hub import FileProgress, Hub, Index, pull, search
from speechgate.hub.refs import parse_ref, ref_for_model, ref_for_voice
from speechgate.voices.installed import find, installed
from tests.helpers.hub import PIPER_REPO, FakeHub, fake_hub, publish_piper_voices

KEYS = ["en_US-lessac-medium", "de_DE-thorsten-medium", "en_GB-alan-low"]
# Nothing here loads a pulled voice: random bytes stand in for its 63 MB model, a few MB (a
# download cut half-way still has whole chunks to resume from).
MODEL = random.Random(0).randbytes(2 * 1024 * 1024)
LESSAC = "en/en_US/lessac/medium/en_US-lessac-medium.onnx"
THORSTEN = "de/de_DE/thorsten/medium/de_DE-thorsten-medium.onnx"


@pytest.fixture(scope="module")
def hub() -> Iterator[FakeHub]:
    with fake_hub() as running:
        publish_piper_voices(running, KEYS, model=MODEL)
        yield running


@pytest.fixture
def client(hub: FakeHub, tmp_path: Path) -> Hub:
    hub.seen.clear()
    return Hub(tmp_path / "hub", endpoint=hub.url)


def test_pull_installs_a_voice_and_reports_progress(
    hub: FakeHub, client: Hub, tmp_path: Path
) -> None:
    events: list[FileProgress] = []
    item = pull(
        "piper:en_US-lessac-medium", models=tmp_path / "models", hub=client, progress=events.append
    )

    model = hub.repos[PIPER_REPO][LESSAC]
    assert item.file("model").read_bytes() == model
    assert item.file("config").name == "en_US-lessac-medium.onnx.json"
    manifest = item.manifest
    assert (manifest.ref, manifest.engine, manifest.name) == (
        "piper:en_US-lessac-medium",
        "piper",
        "en_US-lessac-medium",
    )
    assert [(v.id, v.language, v.quality) for v in manifest.voices] == [
        ("en_US-lessac-medium", "en-US", "medium")
    ]
    assert manifest.size_bytes == sum(
        f.stat().st_size for f in item.directory.iterdir() if f.name != "manifest.json"
    )
    # Every file's last event says it is whole, and the sizes add up to the item's.
    last = {event.file: event for event in events}
    assert set(last) == {LESSAC, LESSAC + ".json"}
    assert all(event.done == event.total for event in last.values())
    assert sum(e.done for e in last.values()) == manifest.size_bytes
    assert [i.manifest.ref for i in installed(tmp_path / "models")] == [manifest.ref]


def test_a_dropped_download_resumes_with_a_range_request(
    hub: FakeHub, client: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    # huggingface_hub writes whole chunks (10 MiB by default): smaller ones make the bytes
    # received before the cut reach the file, so there is something to resume from.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 64 * 1024)
    model = hub.repos[PIPER_REPO][THORSTEN]
    hub.cut_after[PIPER_REPO, THORSTEN] = len(model) // 2

    item = pull("piper:de_DE-thorsten-medium", models=tmp_path / "models", hub=client)

    gets = hub.downloads(THORSTEN)
    assert len(gets) == 2
    assert gets[0].range is None
    assert gets[1].range is not None
    resumed_at = int(gets[1].range.removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= len(model) // 2
    assert hashlib.md5(item.file("model").read_bytes()).digest() == hashlib.md5(model).digest()
    assert item.manifest.voices[0].language == "de-DE"


def test_a_corrupted_file_is_refused_and_nothing_is_installed(
    hub: FakeHub, client: Hub, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    hub.corrupt.add((PIPER_REPO, LESSAC))
    try:
        with pytest.raises(ChecksumMismatch, match="md5"):
            pull("piper:en_US-lessac-medium", models=models, hub=client)
    finally:
        hub.corrupt.clear()
    assert find(models, "piper", "en_US-lessac-medium") is None
    assert not (models / "piper").exists() or not any((models / "piper").iterdir())
    # The bad copy left the cache too: the next pull downloads it again, and succeeds.
    item = pull("piper:en_US-lessac-medium", models=models, hub=client)
    assert len(hub.downloads(LESSAC)) == 2
    assert item.file("model").read_bytes() == hub.repos[PIPER_REPO][LESSAC]


def test_search_filters_by_language_and_shows_what_is_installed(
    client: Hub, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    pull("piper:en_GB-alan-low", models=models, hub=client)
    index = Index(client, pocket_configs=tmp_path / "no-configs")

    german = search(index, models, language="de", engine="piper").results
    assert [(r.ref, r.languages, r.quality) for r in german] == [
        ("piper:de_DE-thorsten-medium", ("de-DE",), "medium")
    ]
    english = search(index, models, language="en", engine="piper").results
    assert {r.ref: r.installed for r in english} == {
        "piper:en_GB-alan-low": True,
        "piper:en_US-lessac-medium": False,
    }
    assert [r.ref for r in search(index, models, language="en-GB", engine="piper").results] == [
        "piper:en_GB-alan-low"
    ]
    assert all(r.size_bytes and r.size_bytes > 1_000_000 for r in english)


def test_search_lists_the_other_engines_despite_one_failing_index(
    client: Hub, tmp_path: Path
) -> None:
    # The fake hub has no Kokoro repository here: search still lists Piper, and says why.
    found = search(Index(client, pocket_configs=tmp_path), tmp_path / "models")
    assert {r.engine for r in found.results} == {"piper"}
    assert "kokoro" in found.errors


def test_unknown_and_malformed_references(client: Hub, tmp_path: Path) -> None:
    models = tmp_path / "models"
    with pytest.raises(NotPullable):
        pull("piper:xx_XX-nobody-low", models=models, hub=client)
    with pytest.raises(InvalidRequest) as error:
        pull("espeak:anything", models=models, hub=client)
    assert error.value.param == "ref"
    assert not models.exists()


def test_references_and_languages_without_the_network() -> None:
    assert parse_ref("kokoro") == ("kokoro", "kokoro-v1.0")
    assert parse_ref("pocket:german") == ("pocket", "german")
    assert ref_for_voice("piper", "de_DE-thorsten-medium") == "piper:de_DE-thorsten-medium"
    assert ref_for_voice("kokoro", "af_heart") == "kokoro"
    assert ref_for_voice("pocket", "juergen") == "pocket:german"
    assert ref_for_voice("piper", "alloy") is None
    assert ref_for_model("kokoro-82m") == "kokoro"
    assert ref_for_model("pocket-tts-hd") == "pocket:english"


def test_auto_pull_pulls_once_for_concurrent_requests(
    hub: FakeHub, client: Hub, tmp_path: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from speechgate.hub.autopull import ensure_installed

    models = tmp_path / "models"
    with ThreadPoolExecutor(3) as pool:
        results = list(
            pool.map(
                lambda _: ensure_installed("piper:en_GB-alan-low", models=models, hub=client),
                range(3),
            )
        )
    assert sorted(pulled for _, pulled in results) == [False, False, True]
    assert len({item.directory for item, _ in results}) == 1
    assert len(hub.downloads("en_GB-alan-low.onnx.json")) == 1


def _disk_full(*_: object, **__: object) -> NoReturn:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_while_downloading_is_insufficient_storage(
    client: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _disk_full)
    with pytest.raises(InsufficientStorage) as raised:
        pull("piper:en_US-lessac-medium", models=tmp_path / "models", hub=client)
    assert (raised.value.status_code, raised.value.code) == (507, "insufficient_storage")
    assert not list(installed(tmp_path / "models"))


def test_a_full_disk_while_installing_is_insufficient_storage(
    client: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "copyfile", _disk_full)
    monkeypatch.setattr(os, "link", _disk_full)
    with pytest.raises(InsufficientStorage):
        pull("piper:en_US-lessac-medium", models=tmp_path / "models", hub=client)
    assert not list(installed(tmp_path / "models"))
    assert not list((tmp_path / "models" / "piper").iterdir())  # no staging left behind
