"""In-process runs: an engine whose voices are all cloned speaks from a voice file."""

from __future__ import annotations

from pathlib import Path

import pytest

from speechgate.bench import TEXTS, measure_single
from speechgate.engines.base import EngineConfig
from tests.helpers.pocket import NEEDS_POCKET, build_tiny_model

pytestmark = [pytest.mark.slow, NEEDS_POCKET]


def test_a_voice_file_given_by_absolute_path_reaches_the_engine(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path)
    # A model from a custom config has no built-in voice: no name would resolve.
    engine = EngineConfig("pocket", options={"config": str(model / "config.yaml")})
    run = measure_single(engine, str(model / "low.wav"), {}, seconds=0.1, texts=TEXTS[:1])
    assert run.stats.completed >= 1
    assert run.stats.errors == {}
    assert run.stats.audio_seconds > 0


def test_a_relative_name_is_still_resolved_as_a_client_voice_name(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path)
    engine = EngineConfig("pocket", options={"config": str(model / "config.yaml")})
    with pytest.raises(RuntimeError, match="VoiceNotFound"):
        measure_single(engine, "low.wav", {}, seconds=0.1, texts=TEXTS[:1])
