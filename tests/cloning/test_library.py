"""The voice library on disk: ids, names, restarts, and no way out of its directory."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest

from speechgate.cloning.library import VoiceLibrary
from speechgate.errors import Conflict, NotFound, SpeechgateError


def test_a_voice_is_stored_found_and_deleted(tmp_path: Path) -> None:
    library = VoiceLibrary(tmp_path / "voices")
    voice = library.add("Ada Lovelace", "pocket", b"state", 4.2)
    assert voice.id.startswith("voice_") and len(voice.id) == 30
    assert library.get(voice.id) == voice
    assert library.find(voice.id) == voice
    # Names compare like catalog names: case and - vs _ do not matter.
    assert library.find("ada lovelace") == voice
    assert library.state_path(voice).read_bytes() == b"state"
    assert library.list() == [voice]

    assert library.delete(voice.id) == voice
    assert library.list() == []
    assert library.find("Ada Lovelace") is None
    assert sorted(p.name for p in (tmp_path / "voices").iterdir()) == []


def test_voices_survive_a_restart(tmp_path: Path) -> None:
    first = VoiceLibrary(tmp_path)
    kept = first.add("kept", "pocket", b"a", 3.0)
    second = first.add("second", "pocket", b"b", 3.0)
    # Oldest first; within one second (created_at is whole seconds, as OpenAI's), by id.
    expected = sorted([kept, second], key=lambda voice: (voice.created_at, voice.id))
    assert VoiceLibrary(tmp_path).list() == expected


def test_names_are_unique(tmp_path: Path) -> None:
    library = VoiceLibrary(tmp_path)
    library.add("Ada", "pocket", b"a", 3.0)
    with pytest.raises(Conflict):
        library.add("ADA", "pocket", b"b", 3.0)
    assert len(library.list()) == 1


@pytest.mark.parametrize(
    "voice_id",
    ["../voices/x", "voice_../../etc/passwd", "/etc/passwd", "voice_" + "0" * 24, "", "VOICE_x"],
)
def test_unknown_or_malformed_ids_are_not_found(tmp_path: Path, voice_id: str) -> None:
    library = VoiceLibrary(tmp_path / "voices")
    library.add("Ada", "pocket", b"a", 3.0)
    (tmp_path / "passwd").write_text("secret")
    with pytest.raises(NotFound):
        library.get(voice_id)
    with pytest.raises(NotFound):
        library.delete(voice_id)
    assert len(library.list()) == 1


def test_incomplete_or_broken_entries_are_skipped(tmp_path: Path) -> None:
    library = VoiceLibrary(tmp_path)
    good = library.add("good", "pocket", b"a", 3.0)
    orphan = library.add("orphan", "pocket", b"b", 3.0)
    library.state_path(orphan).unlink()  # as if a crash came between the two writes
    (tmp_path / ("voice_" + "1" * 24 + ".json")).write_text("{not json")
    assert VoiceLibrary(tmp_path).list() == [good]


def at_once(action: Callable[[], object], times: int = 10) -> list[str]:
    """Run `action` in `times` threads released together; each outcome, sorted: "ok" or the
    status of the error it raised."""
    start = threading.Barrier(times)

    def run() -> str:
        start.wait()
        try:
            action()
        except SpeechgateError as error:
            return str(error.status_code)
        return "ok"

    with ThreadPoolExecutor(times) as pool:
        return sorted(pool.map(lambda _: run(), range(times)))


def test_parallel_deletes_of_one_voice_delete_it_once(tmp_path: Path) -> None:
    library = VoiceLibrary(tmp_path)
    for _ in range(20):
        voice = library.add("doomed", "pocket", b"state", 3.0)
        assert at_once(partial(library.delete, voice.id)) == ["404"] * 9 + ["ok"]
        assert library.list() == []


def test_parallel_adds_with_one_name_store_one_voice(tmp_path: Path) -> None:
    library = VoiceLibrary(tmp_path)
    for round_ in range(20):
        add = partial(library.add, f"twin {round_}", "pocket", b"state", 3.0)
        assert at_once(add) == ["409"] * 9 + ["ok"]
    assert len(library.list()) == 20
    assert len(list(tmp_path.glob("voice_*.json"))) == 20


def test_a_keys_voices_are_its_own(tmp_path: Path) -> None:
    library = VoiceLibrary(tmp_path)
    mine = library.add("Ada", "pocket", b"a", 3.0, owner="key_a")
    theirs = library.add("Ada", "pocket", b"b", 3.0, owner="key_b")  # names are per key
    for voice, other in ((mine, "key_b"), (theirs, "key_a")):
        assert library.find(voice.id, owner=other) is None
        with pytest.raises(NotFound):
            library.get(voice.id, owner=other)
        with pytest.raises(NotFound):
            library.delete(voice.id, owner=other)
    assert library.list(owner="key_a") == [mine]
    assert library.find("ada", owner="key_b") == theirs
    # No owner (the admin, or anyone on a server without keys) sees every voice.
    assert {v.id for v in library.list()} == {mine.id, theirs.id}
    assert library.get(mine.id) == mine
    # The owner is stored with the voice and survives a restart.
    assert VoiceLibrary(tmp_path).list(owner="key_b") == [theirs]
    assert library.delete(mine.id, owner="key_a") == mine
