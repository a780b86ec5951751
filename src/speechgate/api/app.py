"""The application factory."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import Depends, FastAPI

from speechgate import __version__, tracing
from speechgate.api import (
    admin,
    chat_completions,
    elevenlabs,
    models,
    openai_speech,
    ops,
    routing_admin,
    status,
    stream,
    usage_routes,
    voice_routes,
    web,
)
from speechgate.api.access import UsageMiddleware, authenticate
from speechgate.api.error_handlers import install_error_handlers
from speechgate.api.middleware import (
    BodyLimitMiddleware,
    RequestIdMiddleware,
    ResponseMetricsMiddleware,
)
from speechgate.api.schemas import error_responses
from speechgate.api.state import AppState, store
from speechgate.dictionaries import Dictionaries, operator_lexicon
from speechgate.metering.tenancy import Tenancy
from speechgate.metrics import Metrics
from speechgate.openai_upstream import LlmRelay
from speechgate.routing.config import load_routes
from speechgate.runtime import Runtime
from speechgate.serving import Serving
from speechgate.settings import Settings
from speechgate.startup_summary import startup_summary

log = logging.getLogger("speechgate")


def create_app(settings: Settings) -> FastAPI:
    """Build the app; its lifespan starts the engine workers and stops them on shutdown."""
    # An invalid routes file fails here, before anything starts.
    routes = load_routes(settings.routing.routes_file) if settings.routing.routes_file else None
    if routes is not None:
        routing_admin.check_local_models(routes, settings)
    # Read once, here: a lexicon that became invalid since the settings were checked fails
    # before anything starts.
    lexicon = operator_lexicon(settings.text.lexicon_path)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Whatever was built is closed, in reverse, on shutdown and on a failed start alike.
        async with AsyncExitStack() as built:
            if settings.tracing.otlp_endpoint is not None:
                # Stopped last: the spans of requests that end while the rest stops are sent.
                built.enter_context(tracing.exporting(settings.tracing.otlp_endpoint))
            tenancy = await Tenancy.open(settings)
            # Closed last: requests ended before still record their usage, and this writes it.
            built.push_async_callback(tenancy.close)
            dictionaries = Dictionaries(lexicon, tenancy.store.get_dictionary)
            runtime = await Runtime.start(settings, metrics, dictionaries)
            built.push_async_callback(runtime.close)
            llm = LlmRelay.from_settings(settings.llm)
            if llm is not None:
                built.push_async_callback(llm.aclose)
            serving = Serving(
                runtime.service,
                tenancy,
                openai_speech.sse_events,
                max_pending_chars=settings.text.max_input_chars,
            )
            if routes is not None:
                # The router's local provider serves through `serving` again, so it comes second.
                serving.router = routing_admin.start_router(settings, routes, serving, metrics)
                built.push_async_callback(serving.router.aclose)
                built.enter_context(routing_admin.reload_on_sighup(serving.router))
            store(app, AppState(settings, metrics, tenancy, runtime, llm, serving.router, serving))
            if settings.wyoming.uri is not None:
                # Imported here: the `wyoming` extra is needed only by those who turn it on.
                from speechgate import wyoming

                built.push_async_callback(
                    await wyoming.start(
                        settings.wyoming.uri, runtime, serving, settings.wyoming.zeroconf
                    )
                )
            summary = startup_summary(settings, runtime.catalog)
            if settings.log.format == "json":
                log.info("serving", extra={"serving": summary.fields()})
            else:
                log.info("%s", summary.text())
            yield

    app = FastAPI(
        title="speechgate",
        version=__version__,
        summary="OpenAI-compatible speech server for local text-to-speech engines.",
        lifespan=lifespan,
    )
    metrics = Metrics()
    install_error_handlers(app)
    # Every /v1 route needs a key when auth_mode is `keys`; the admin API needs the admin key.
    keyed = (
        openai_speech.router,
        stream.router,
        # Before catalog's: its GET /v1/models takes ElevenLabs' clients, the other the rest.
        elevenlabs.router,
        models.router,
        voice_routes.router,
        chat_completions.router,
        usage_routes.router,
        status.router,
    )
    for router in keyed:
        app.include_router(
            router, dependencies=[Depends(authenticate)], responses=error_responses(401)
        )
    app.include_router(admin.router)
    app.include_router(routing_admin.admin)
    app.include_router(ops.router)
    if settings.server.playground:
        web.install(app)
    # Added innermost first: request ids and response counts see every response, 413s included.
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.server.max_body_bytes,
        # An upload's multipart framing and form fields come on top of the file itself.
        max_bytes_by_path={"/v1/audio/voices": settings.cloning.max_upload_bytes + 65536},
        body_timeout=settings.server.body_timeout,
    )
    app.add_middleware(UsageMiddleware)
    app.add_middleware(ResponseMetricsMiddleware, metrics=metrics)
    app.add_middleware(RequestIdMiddleware)
    return app
