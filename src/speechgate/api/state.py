"""The running server's parts, as one typed object.

The app's lifespan builds an `AppState` once everything has started and stores it on the app;
routes, the WebSocket and middleware read it through `app_state` (or `CurrentState`, as a
FastAPI dependency), never through loose `app.state` attributes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from speechgate.catalog import Catalog
from speechgate.cloning.cloner import VoiceCloning
from speechgate.metering.tenancy import Tenancy
from speechgate.metrics import Metrics
from speechgate.openai_upstream import LlmRelay
from speechgate.routing.router import Router
from speechgate.runtime import Runtime
from speechgate.service import SpeechService
from speechgate.serving import Serving
from speechgate.settings import Settings

# The one attribute of Starlette's `app.state` that speechgate uses.
_ATTRIBUTE = "speechgate"


@dataclass(frozen=True)
class AppState:
    """What a request can use: built by the lifespan, the same object until shutdown."""

    settings: Settings
    metrics: Metrics
    tenancy: Tenancy
    """Keys, limits and usage records."""
    runtime: Runtime
    """The engine pools, the catalog and the voice library."""
    llm: LlmRelay | None
    """The chat relay; None unless SPEECHGATE_LLM__BASE_URL is set."""
    router: Router | None
    """The provider router; None unless SPEECHGATE_ROUTING__ROUTES_FILE is set."""
    serving: Serving
    """The one lifecycle every speech request goes through."""

    @property
    def service(self) -> SpeechService:
        return self.runtime.service


def store(app: Starlette, state: AppState) -> None:
    setattr(app.state, _ATTRIBUTE, state)


def started(app: Starlette) -> AppState | None:
    """The app's state, or None before its lifespan has started it (or when starting failed)."""
    state: AppState | None = getattr(app.state, _ATTRIBUTE, None)
    return state


def app_state(connection: HTTPConnection) -> AppState:
    """The state of the app serving `connection` (a request or a WebSocket). Servers run the
    lifespan before they accept a connection, so it is there."""
    state = started(connection.app)
    if state is None:
        raise RuntimeError("speechgate's app is serving before its lifespan has started it")
    return state


# `async def` on purpose: FastAPI runs plain `def` dependencies in a thread pool, two thread
# hops per request for what is only an attribute read.
async def get_app_state(connection: HTTPConnection) -> AppState:
    return app_state(connection)


CurrentState = Annotated[AppState, Depends(get_app_state)]


async def get_runtime(connection: HTTPConnection) -> Runtime:
    return app_state(connection).runtime


async def get_catalog(connection: HTTPConnection) -> Catalog:
    return app_state(connection).runtime.catalog


async def get_voices(connection: HTTPConnection) -> VoiceCloning:
    return app_state(connection).runtime.voices
