"""Where a run's engines keep their models: one directory for all its test processes, so that a
model is assembled and optimized once a run rather than once in each (engines lock one another
out of a model they are making, as a server's workers do). Only the standard library: the
process that starts the run makes the directory before pytest-xdist starts any test process,
which inherit its environment."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_VARIABLE = "SPEECHGATE_TESTS_ENGINES_DIR"


def start() -> Path | None:
    """Make the run's directory, unless this process belongs to a run that has one; returns the
    directory it made, for its maker to remove at the run's end."""
    if _VARIABLE in os.environ:
        return None
    made = tempfile.mkdtemp(prefix="speechgate-engines-")
    os.environ[_VARIABLE] = made
    return Path(made)


def directory() -> Path:
    """The run's directory (made here, for a process that imports the helpers outside a run)."""
    start()
    return Path(os.environ[_VARIABLE])
