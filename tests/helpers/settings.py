"""Settings for tests: never the developer's environment, always a throw-away data directory."""

from __future__ import annotations

import tempfile
from pathlib import Path

from speechgate.settings import Settings

DATA_DIR = Path(tempfile.mkdtemp(prefix="speechgate-tests-"))
"""One for the whole run (engines may assemble models into it); removed at its end."""


def make_settings(**overrides: object) -> Settings:
    """The real default engines (Piper, espeak-ng), two workers, no phrase cache (tests count
    the jobs repeated requests run), unless `overrides` say."""
    values: dict[str, object] = {
        "engines": ["piper", "espeak"],
        "workers": 2,
        "data_dir": DATA_DIR,
        "phrase_cache_bytes": 0,
        **overrides,
    }
    return Settings.model_validate(values)


def fake_settings(**overrides: object) -> Settings:
    """Settings for tests whose subject is the API, the errors, tenancy or routing, not the
    engine: the fake engine (loads in microseconds), one worker (one process to start)."""
    return make_settings(**{"engines": ["fake"], "workers": 1, **overrides})
