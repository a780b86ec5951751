"""How engine processes start: forked from a fork server that has imported their code.

Not `fork` from the gateway, whose threads' locks a child would inherit mid-flight, nor
`spawn`, which re-imports every runtime on every start and restart. The fork server loads no
engine, so a restarted worker loads its engine afresh; what it forks has the environment of
this process when its first engine process started.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable

from speechgate.engines import engine_plugin

CONTEXT = multiprocessing.get_context("forkserver")
# "__main__" (the gateway's script) runs once in the fork server, not in every worker.
_preloaded = dict.fromkeys(  # an ordered set
    ["__main__", "speechgate.workers.process", "speechgate.workers.fork_preload"]
)


def preload_engines(names: Iterable[str]) -> None:
    """Have the fork server import these engines' modules and runtimes when it starts; later
    calls add nothing to a running server."""
    _preloaded.update(
        dict.fromkeys(module for name in names for module in engine_plugin(name).preloaded_modules)
    )
    CONTEXT.set_forkserver_preload(list(_preloaded))
