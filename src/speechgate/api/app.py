"""The application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from speechgate import __version__
from speechgate.api import catalog, chat, ops, speech, status, stream, voices, web
from speechgate.api.errors import install_error_handlers
from speechgate.api.middleware import (
    BodyLimitMiddleware,
    RequestIdMiddleware,
    ResponseMetricsMiddleware,
)
from speechgate.llm import LlmRelay
from speechgate.metrics import Metrics
from speechgate.runtime import Runtime
from speechgate.settings import Settings


def create_app(settings: Settings) -> FastAPI:
    """Build the app; its lifespan starts the engine workers and stops them on shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = await Runtime.start(settings, metrics)
        app.state.runtime = runtime
        app.state.llm = llm = LlmRelay.from_settings(settings)
        try:
            yield
        finally:
            if llm is not None:
                await llm.aclose()
            await runtime.close()

    app = FastAPI(
        title="speechgate",
        version=__version__,
        summary="OpenAI-compatible speech server for local text-to-speech engines.",
        lifespan=lifespan,
    )
    metrics = Metrics()
    app.state.settings = settings
    app.state.metrics = metrics
    install_error_handlers(app)
    app.include_router(speech.router)
    app.include_router(stream.router)
    app.include_router(catalog.router)
    app.include_router(voices.router)
    app.include_router(ops.router)
    app.include_router(chat.router)
    app.include_router(status.router)
    if settings.playground:
        web.install(app)
    # Added innermost first: request ids and response counts see every response, 413s included.
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_body_bytes,
        # An upload's multipart framing and form fields come on top of the file itself.
        max_bytes_by_path={"/v1/audio/voices": settings.clone_max_upload_bytes + 65536},
    )
    app.add_middleware(ResponseMetricsMiddleware, metrics=metrics)
    app.add_middleware(RequestIdMiddleware)
    return app
