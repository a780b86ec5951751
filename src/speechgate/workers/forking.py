"""How engine processes start: forked from a fork server that has imported their code.

Not `fork` from the gateway, whose threads' locks a child would inherit mid-flight, nor
`spawn`, which re-imports every runtime on every start and restart. The fork server loads no
engine, so a restarted worker loads its engine afresh; what it forks has the environment of
this process when its first engine process started.
"""

from __future__ import annotations

import functools
import multiprocessing
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from speechgate.engines import engine_plugin

CONTEXT = multiprocessing.get_context("forkserver")


@functools.cache
def _main_module() -> tuple[str, ...]:
    """The module that the gateway's main runs, by name: `python -m NAME`'s, or the one that a
    console script (`speechgate`) calls. Every engine process runs the main module again when it
    starts (so multiprocessing sets up its `__main__`); with what it imports in the fork server
    already, that costs it nothing. (multiprocessing's own "__main__" preload is never given
    the script's path, so it imports nothing.)"""
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        name = spec.name
    else:
        script = Path(getattr(main, "__file__", None) or "").name
        found = entry_points(group="console_scripts", name=script)
        name = next((entry.module for entry in found), "__main__")
    # A package's `__main__` (`python -m speechgate.cli`) runs its command when imported; an
    # engine process does not run it again either.
    return () if name.rpartition(".")[2] == "__main__" else (name,)


# An ordered set: the engine process's entry point, then the engines' modules.
_preloaded = dict.fromkeys(["speechgate.workers.process"])
# Imported after them all: it sets aside from the collector all that the fork server holds.
_LAST = "speechgate.workers.fork_preload"


def preload_engines(names: Iterable[str]) -> None:
    """Have the fork server import these engines' modules and runtimes when it starts; later
    calls add nothing to a running server."""
    _preloaded.update(
        dict.fromkeys(module for name in names for module in engine_plugin(name).preloaded_modules)
    )
    CONTEXT.set_forkserver_preload([*_main_module(), *_preloaded, _LAST])
