"""Provider routing in the app: building the router, SIGHUP reloads, and the admin routes
under `/v1/admin/routing` (the admin key only, as the rest of the admin API)."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from speechgate.api.access import require_admin
from speechgate.api.schemas import error_responses
from speechgate.api.state import app_state
from speechgate.catalog import engine_for_model
from speechgate.errors import InvalidRequest, NotConfigured
from speechgate.metrics import Metrics
from speechgate.routing.config import (
    ElevenLabsProviderConfig,
    LocalProviderConfig,
    ProviderConfig,
    RoutesConfig,
)
from speechgate.routing.prometheus import RoutingMetrics
from speechgate.routing.providers import (
    ElevenLabsProvider,
    LocalProvider,
    Provider,
    RemoteProvider,
)
from speechgate.routing.router import Router
from speechgate.serving import Serving
from speechgate.settings import Settings

log = logging.getLogger(__name__)


def check_local_models(config: RoutesConfig, settings: Settings) -> None:
    """Fail at start-up if a route would send a local provider a model it does not serve."""
    for model, route in config.routes.items():
        for name in {*route.providers, *route.fallback}:
            provider = config.providers[name]
            if isinstance(provider, LocalProviderConfig):
                engine_for_model(settings, provider.model or model)


def start_router(
    settings: Settings, config: RoutesConfig, serving: Serving, metrics: Metrics
) -> Router:
    """The router for `config`; its local providers serve through `serving`'s local part."""

    def make_provider(name: str, provider: ProviderConfig) -> Provider:
        if isinstance(provider, LocalProviderConfig):
            return LocalProvider(name, provider, serving.serve_locally)
        if isinstance(provider, ElevenLabsProviderConfig):
            return ElevenLabsProvider(name, provider)
        return RemoteProvider(name, provider)

    return Router(
        config,
        make_provider,
        path=settings.routing.routes_file,
        metrics=RoutingMetrics(metrics.registry),
        default_sample_rate=settings.audio.default_sample_rate,
    )


@contextmanager
def reload_on_sighup(router: Router) -> Iterator[None]:
    """Re-read the routes file on SIGHUP (only the main thread can take signals: a server
    run in a thread, as in tests, reloads through the admin route instead)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def reload() -> None:
        try:
            router.reload()
        except ValueError as error:
            log.error("routes not reloaded, the ones in force stay: %s", error)

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, reload)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGHUP)


# --- admin routes -------------------------------------------------------------------------


async def get_router(request: Request) -> Router:
    router = app_state(request).router
    if router is None:
        raise NotConfigured("Routing is not configured (SPEECHGATE_ROUTING__ROUTES_FILE is unset).")
    return router


Admin = Annotated[Router, Depends(get_router)]
admin = APIRouter(
    prefix="/v1/admin/routing",
    dependencies=[Depends(require_admin)],
    responses=error_responses(400, 401, 403, 404),
)


class Weights(BaseModel):
    weights: dict[str, float] = Field(description="Provider -> weight in percent.")


class Promotion(BaseModel):
    provider: str


@admin.get("")
async def show(router: Admin) -> dict[str, Any]:
    """Routes with their weights, and each provider's state and breaker."""
    return router.state.describe()


@admin.put("/routes/{model}/weights")
async def set_weights(model: str, body: Weights, router: Admin) -> dict[str, Any]:
    """New weights, for the next request on."""
    router.set_state(router.state.with_weights(model, body.weights))
    return router.state.describe()


@admin.post("/routes/{model}/promote")
async def promote(model: str, body: Promotion, router: Admin) -> dict[str, Any]:
    """All of the route's traffic to one provider; the others stay warm at 0 %."""
    router.set_state(router.state.promoted(model, body.provider))
    return router.state.describe()


@admin.post("/providers/{name}/enable")
async def enable(name: str, router: Admin) -> dict[str, Any]:
    router.set_state(router.state.with_enabled(name, True))
    return router.state.describe()


@admin.post("/providers/{name}/disable")
async def disable(name: str, router: Admin) -> dict[str, Any]:
    """No new requests to the provider (those under way finish)."""
    router.set_state(router.state.with_enabled(name, False))
    return router.state.describe()


@admin.post("/reload")
async def reload(router: Admin) -> dict[str, Any]:
    """Re-read the routes file, as SIGHUP does; runtime changes are dropped."""
    try:
        router.reload()
    except ValueError as error:
        raise InvalidRequest(f"The routes file is invalid: {error}", param="routes_file") from None
    return router.state.describe()


@admin.get("/shadow")
async def shadow_report(router: Admin) -> dict[str, Any]:
    """Shadow comparisons: totals per route and the latest pairs."""
    return router.shadow_log.report()
