"""Shared fixtures: one real server with the real engines for the whole session, and one with the
fake engine (a tone, no model, one worker) for tests whose subject is not the engine."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from speechgate.settings import Settings
from tests.helpers.postgres import fresh_database, postgres_cluster
from tests.helpers.redis import redis_instance
from tests.helpers.server import RunningServer, running_server
from tests.helpers.tls import share_default_contexts

share_default_contexts()

# One throw-away data directory for the whole run (engines may assemble models into it).
_DATA_DIR = Path(tempfile.mkdtemp(prefix="speechgate-tests-"))


def make_settings(**overrides: object) -> Settings:
    """Settings for tests: never the developer's environment, a throw-away data dir."""
    values: dict[str, object] = {
        "engines": ["piper", "espeak"],
        "workers": 2,
        "data_dir": _DATA_DIR,
        **overrides,
    }
    return Settings.model_validate(values)


@pytest.fixture(scope="session", autouse=True)
def _remove_data_dir() -> Iterator[None]:
    yield
    shutil.rmtree(_DATA_DIR, ignore_errors=True)


def fake_settings(**overrides: object) -> Settings:
    """Settings for tests whose subject is the API, the errors, tenancy or routing, not the
    engine: the fake engine (loads in microseconds), one worker (one process to spawn)."""
    return make_settings(**{"engines": ["fake"], "workers": 1, **overrides})


@pytest.fixture(scope="session")
def server() -> Iterator[RunningServer]:
    with running_server(make_settings()) as running:
        yield running


def sdk_client(server: RunningServer) -> openai.OpenAI:
    """The official SDK pointed at `server`, without retries (a retry would hide a failure)."""
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


@pytest.fixture
def client(server: RunningServer) -> Iterator[openai.OpenAI]:
    with sdk_client(server) as sdk:
        yield sdk


@pytest.fixture(scope="session")
def fake_server() -> Iterator[RunningServer]:
    with running_server(fake_settings()) as running:
        yield running


@pytest.fixture
def fake_client(fake_server: RunningServer) -> Iterator[openai.OpenAI]:
    with sdk_client(fake_server) as sdk:
        yield sdk


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A real PostgreSQL server for the whole run, started only if a test asks for it."""
    with postgres_cluster() as url:
        yield url


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """A real Redis server for the whole run, started only if a test asks for it."""
    with redis_instance() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store on each backend: a new SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return fresh_database(request.getfixturevalue("postgres_server"))
