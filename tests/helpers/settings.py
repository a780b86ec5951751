"""Settings for tests: never the developer's environment, always a throw-away data directory."""

from __future__ import annotations

import tempfile
from pathlib import Path

from speechgate.settings import Settings
from tests.helpers import run_engines

DATA_DIR = Path(tempfile.mkdtemp(prefix="speechgate-tests-"))
"""One for the whole test process (its servers' keys, voices, usage); removed at its end."""
ENGINES_DIR = run_engines.directory()
"""The engines' data directories of the run, one per engine, as the servers lay them out; every
test process of the run shares them (tests/helpers/run_engines.py)."""


def engine_data_dir(engine: str) -> str:
    """The data directory of `engine` as the servers of this run give it to their workers, for
    an engine a test builds itself: a model loaded before in this run, by a test or a worker,
    loads from its optimized copy (a fraction of the time) rather than being optimized again."""
    return str(ENGINES_DIR / engine)


def share_engine_data(data_dir: Path) -> None:
    """Give a server whose data directory is `data_dir` (its own keys, voices, models) the
    engines' data directories of the run (`engine_data_dir`): a model optimized before in this
    run, by any server or test, loads from that copy rather than being optimized again."""
    ENGINES_DIR.mkdir(parents=True, exist_ok=True)
    (data_dir / "engines").symlink_to(ENGINES_DIR, target_is_directory=True)


share_engine_data(DATA_DIR)


def make_settings(**overrides: object) -> Settings:
    """The real default engines (Piper, espeak-ng), two workers, no phrase cache (tests count
    the jobs repeated requests run), unless `overrides` say (a group's as a dict of the fields
    to change, e.g. `pool={"queue_size": 0}`: the rest of the group keeps these defaults)."""
    defaults: dict[str, object] = {
        "engines": ["piper", "espeak"],
        "pool": {"workers": 2},
        "data_dir": DATA_DIR,
        "phrase_cache": {"max_bytes": 0},
    }
    return Settings.model_validate(merged(defaults, overrides))


def fake_settings(**overrides: object) -> Settings:
    """Settings for tests whose subject is the API, the errors, tenancy or routing, not the
    engine: the fake engine (loads in microseconds), one worker (one process to start)."""
    return make_settings(**merged({"engines": ["fake"], "pool": {"workers": 1}}, overrides))


def merged(defaults: dict[str, object], overrides: dict[str, object]) -> dict[str, object]:
    """`defaults` with `overrides` on top; a group given in both is merged field by field."""
    values = dict(defaults)
    for name, value in overrides.items():
        default = values.get(name)
        values[name] = (
            {**default, **value} if isinstance(default, dict) and isinstance(value, dict) else value
        )
    return values
