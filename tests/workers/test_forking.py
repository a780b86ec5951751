"""Engine processes start from the fork server, with the served engines' modules imported."""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection

from speechgate.workers.forking import CONTEXT, preload_engines


def _report(conn: Connection) -> None:
    engines = sorted(name for name in sys.modules if name.startswith("speechgate.engines."))
    conn.send((os.getppid(), engines))


def test_an_engine_process_is_forked_by_the_fork_server_with_its_engine_imported() -> None:
    # The test processes preload every engine (tests/conftest.py); asking again adds nothing
    # where the fork server already runs.
    preload_engines(["espeak"])
    receiver, sender = CONTEXT.Pipe(duplex=False)
    process = CONTEXT.Process(target=_report, args=(sender,))
    process.start()
    sender.close()
    parent, engines = receiver.recv()
    process.join(timeout=30)
    # Not a child of this process (whose threads' locks it would inherit mid-flight)...
    assert parent != os.getpid()
    # ...and started with the engine's module, and its runtime, already imported.
    assert "speechgate.engines.espeak.engine" in engines
    assert process.exitcode == 0
