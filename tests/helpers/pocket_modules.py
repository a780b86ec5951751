"""The test modules that run pocket-tts, given to one test process together.

Importing pocket-tts (torch, scipy) takes seconds of CPU, paid by every test process that loads
the engine itself and by every fork server that preloads it for its engine processes. Under
`make test` the modules below run in one test process (tests/conftest.py), and only its fork
server preloads pocket-tts. A module missing here still passes, at that cost again.
"""

ENGINE = "pocket"

# Each loads pocket-tts in the test process or starts its engine processes.
MODULES = frozenset(
    {
        "tests/bench/test_baselines.py",
        "tests/bench/test_inprocess.py",
        "tests/e2e/test_playground.py",
        "tests/e2e/test_pocket_server.py",
        "tests/engines/test_contract.py",
        "tests/engines/test_phonemes.py",
        "tests/engines/test_pocket.py",
        "tests/hub/test_pull_models.py",
        "tests/test_cli.py",
    }
)


def runs_pocket(nodeid: str) -> bool:
    return nodeid.split("::", 1)[0] in MODULES
