"""How engine processes start: forked from a fork server that has imported their code.

Not forked from the gateway (`fork`), which runs an event loop and threads (uvicorn's,
onnxruntime's) whose locks a child would inherit mid-flight, and not each from a fresh
interpreter (`spawn`), which made every start and restart import numpy, PyAV, speechgate and
the engine's runtime again (0.3 s of CPU for the fake engine, 3.7 s for pocket-tts). The fork
server imports modules and loads no engine, so a restarted worker still loads its engine from
scratch. "__main__": the gateway's script (`speechgate`, which imports the CLI) runs there
once, not in every process. The fork server starts at this process's first engine process
start, and what it forks has the environment this process had then.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable

from speechgate.engines import engine_plugin

CONTEXT = multiprocessing.get_context("forkserver")
_preloaded = dict.fromkeys(["__main__", "speechgate.workers.process"])  # an ordered set


def preload_engines(names: Iterable[str]) -> None:
    """Have the fork server import these engines' modules, and with them their runtimes
    (onnxruntime, torch): once, when it starts, which is at this process's first engine process
    start; later calls add nothing to a server already running. A module that fails to import
    fails in the processes that load it, as it would without this."""
    _preloaded.update(
        dict.fromkeys(module for name in names for module in engine_plugin(name).preloaded_modules)
    )
    CONTEXT.set_forkserver_preload(list(_preloaded))
