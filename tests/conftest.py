"""Shared fixtures: one real server with the real engines for the whole session, one with the
fake engine (a tone, no model, one worker) for tests whose subject is not the engine, and that
app in-process (no uvicorn) for tests whose subject is the API's behaviour.

pytest-xdist's controller imports this file too, before it starts any test process, and runs no
test: what a fixture needs (the app, the SDK) is imported when a test asks for it."""

from __future__ import annotations

import gc
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers import pocket_modules

if TYPE_CHECKING:
    import openai

    from tests.helpers.inprocess import InProcessApp
    from tests.helpers.server import RunningServer


def pytest_configure(config: pytest.Config) -> None:
    """In the process that starts the run, before any test process: the run's directory of the
    engines' models, removed at its end by this process alone."""
    from tests.helpers import run_engines

    made = run_engines.start()
    if made is not None:
        config.add_cleanup(lambda: shutil.rmtree(made, ignore_errors=True))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before a test process's first test (xdist's controller runs none)."""
    from tests.helpers.tls import share_default_contexts

    share_default_contexts()
    # A test process that runs real engines (`slow` tests) serves most of them at some point:
    # its workers' fork server imports them all once, rather than every worker importing its
    # own. One that runs only the fake engine (the inner loop, `make test-fast`) imports none
    # of them. Of the test processes of `make test`, only the one given pocket-tts' modules
    # imports pocket-tts, when it starts them (`pytest_runtest_setup`).
    if any(item.get_closest_marker("slow") for item in session.items):
        from speechgate.settings import known_engines
        from speechgate.workers.forking import preload_engines

        apart = "PYTEST_XDIST_WORKER" in os.environ
        preload_engines(
            name for name in known_engines() if not (apart and name == pocket_modules.ENGINE)
        )
        session.config.stash[_PRELOADING] = True


_PRELOADING = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.config.stash.get(_PRELOADING, False) and pocket_modules.runs_pocket(item.nodeid):
        from speechgate.workers.forking import preload_engines

        # pocket-tts' modules come first in the run (`pytest_collection_modifyitems`): the
        # process given them runs them first, before its fork server starts.
        preload_engines([pocket_modules.ENGINE])


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's: absent under `-p no:xdist`
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadscope` (the Makefile's), with pocket-tts' modules given to one process."""
    if config.getoption("dist") != "loadscope":
        return None
    from tests.helpers.scheduling import PocketModulesTogether

    return PocketModulesTogether(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """pocket-tts' modules first (they then start a test process), then the modules that run
    real engines or servers (`slow`), the quick ones last, where they even out the test
    processes' ends; each by its number of tests, as pytest-xdist orders them
    (`--no-loadscope-reorder` in the Makefile keeps this order). By count alone, the one-test
    modules of real servers came last, and the other processes waited for them."""
    slow: dict[Path, bool] = {}
    count: dict[Path, int] = {}
    for item in items:
        slow[item.path] = slow.get(item.path, False) or item.get_closest_marker("slow") is not None
        count[item.path] = count.get(item.path, 0) + 1
    items.sort(
        key=lambda item: (
            not pocket_modules.runs_pocket(item.nodeid),
            not slow[item.path],
            -count[item.path],
        )
    )


@pytest.hookimpl(wrapper=True)
def pytest_collection() -> Iterator[object]:
    # Importing the test modules and what they import makes little garbage, but the collector
    # would run full passes over the growing heap all along.
    gc.disable()
    try:
        return (yield)
    finally:
        gc.enable()
        # What collection imported lives as long as the run: set aside from the collector,
        # whose full passes would walk all of it again and again.
        gc.collect()
        gc.freeze()


def pytest_unconfigure() -> None:
    # The interpreter's teardown collections would walk all that the run left, which goes with
    # the process anyway.
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def _remove_data_dir() -> Iterator[None]:
    from tests.helpers.settings import DATA_DIR

    yield
    shutil.rmtree(DATA_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[RunningServer]:
    """The real engines' server. Its streaming sessions send as fast as the client reads (as
    `fake_app`'s): held to real time, each session waited out most of its audio's length."""
    from tests.helpers.server import running_server
    from tests.helpers.settings import make_settings

    with running_server(make_settings(sessions={"max_lead_seconds": 0})) as running:
        yield running


@pytest.fixture
def client(server: RunningServer) -> Iterator[openai.OpenAI]:
    from tests.helpers.server import sdk_client

    with sdk_client(server) as sdk:
        yield sdk


@pytest.fixture(scope="session")
def fake_server() -> Iterator[RunningServer]:
    from tests.helpers.server import running_server
    from tests.helpers.settings import fake_settings

    with running_server(fake_settings()) as running:
        yield running


@pytest.fixture
def fake_client(fake_server: RunningServer) -> Iterator[openai.OpenAI]:
    from tests.helpers.server import sdk_client

    with sdk_client(fake_server) as sdk:
        yield sdk


@pytest.fixture(scope="session")
def fake_app() -> Iterator[InProcessApp]:
    """The fake engine's app in this process, for the whole session. Its streaming sessions
    send as fast as the client reads: held to real time (the default), a session of a few
    seconds' audio took as long (the pacer is tests/api/test_stream_limits.py's subject)."""
    from tests.helpers.inprocess import in_process
    from tests.helpers.settings import fake_settings

    with in_process(fake_settings(sessions={"max_lead_seconds": 0})) as app:
        yield app


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real PostgreSQL server for the whole run, started only if a test asks for it."""
    from tests.helpers.postgres import postgres_cluster

    with postgres_cluster() as url:
        yield url


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """A real Redis server for the whole run, started only if a test asks for it."""
    from tests.helpers.redis import redis_instance

    with redis_instance() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store on each backend: a new SQLite file, or a new PostgreSQL database."""
    from tests.helpers.postgres import fresh_database

    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return fresh_database(request.getfixturevalue("postgres_server"))
