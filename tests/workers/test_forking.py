"""Engine processes start from the fork server, with the served engines' modules, the gateway's
main module and what it imports, and the normalizer's number rules loaded and frozen."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from speechgate.text import normalize

# Run in an interpreter of its own: this test process's fork server may already be running,
# started with whatever its earlier tests preloaded (tests/conftest.py), and a running fork
# server takes no more preloads.
_CHECK = textwrap.dedent(
    """
    import gc, json, os, sys
    import imported_by_main
    from speechgate.workers.forking import CONTEXT, preload_engines

    def report(conn):
        engines = sorted(n for n in sys.modules if n.startswith("speechgate.engines."))
        number_words = sys.modules.get("speechgate.text.normalize.number_words")
        rules = sorted(number_words._ENGINES) if number_words else []
        engine = sys.modules["speechgate.engines.espeak.engine"].__dict__
        walked = any(thing is engine for thing in gc.get_objects())
        conn.send((os.getppid(), engines, rules, imported_by_main.IMPORTED_IN, walked))

    if __name__ == "__main__":
        preload_engines(["espeak"])
        receiver, sender = CONTEXT.Pipe(duplex=False)
        process = CONTEXT.Process(target=report, args=(sender,))
        process.start()
        sender.close()
        parent, engines, rules, main_imports, walked = receiver.recv()
        process.join(timeout=30)
        print(json.dumps({"me": os.getpid(), "parent": parent, "engines": engines,
                          "rules": rules, "main_imports": main_imports,
                          "engine_walked_by_collector": walked, "exitcode": process.exitcode}))
    """
)


def test_an_engine_process_is_forked_by_the_fork_server_with_what_every_process_loads(
    tmp_path: Path,
) -> None:
    # The gateway's main module, run by name as `python -m speechgate.cli` runs.
    (tmp_path / "check.py").write_text(_CHECK)
    (tmp_path / "imported_by_main.py").write_text("import os\nIMPORTED_IN = os.getpid()\n")
    done = subprocess.run(
        [sys.executable, "-m", "check"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # Not a child of the asking process (whose threads' locks it would inherit mid-flight)...
    assert seen["parent"] != seen["me"]
    # ...and started with the engine's module, and its runtime, already imported.
    assert "speechgate.engines.espeak.engine" in seen["engines"]
    # ...and every language's number rules, which each process would otherwise read itself.
    assert seen["rules"] == sorted(normalize.LANGUAGES)
    # ...and what the main module imports, which each process would otherwise import again as
    # it sets up its `__main__`.
    assert seen["main_imports"] == seen["parent"]
    # ...with all that the fork server imported set aside from the collector, the engines
    # included, whose full passes would walk it (and copy the memory it shares) in each process.
    assert seen["engine_walked_by_collector"] is False
    assert seen["exitcode"] == 0
