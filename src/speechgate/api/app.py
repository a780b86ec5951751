"""The application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from speechgate import __version__
from speechgate.api import catalog, speech
from speechgate.api.errors import install_error_handlers
from speechgate.api.middleware import BodyLimitMiddleware, RequestIdMiddleware
from speechgate.runtime import Runtime
from speechgate.settings import Settings


def create_app(settings: Settings) -> FastAPI:
    """Build the app; its lifespan starts the engine workers and stops them on shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = await Runtime.start(settings)
        app.state.runtime = runtime
        try:
            yield
        finally:
            await runtime.close()

    app = FastAPI(
        title="speechgate",
        version=__version__,
        summary="OpenAI-compatible speech server for local text-to-speech engines.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    install_error_handlers(app)
    app.include_router(speech.router)
    app.include_router(catalog.router)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestIdMiddleware)
    return app
