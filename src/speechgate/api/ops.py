"""Operations routes: liveness, readiness, metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response

from speechgate.api.schemas import Health, Readiness
from speechgate.api.state import CurrentState, get_runtime
from speechgate.runtime import Runtime

router = APIRouter()


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process is up and serving HTTP."""
    return Health()


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(runtime: Annotated[Runtime, Depends(get_runtime)]) -> JSONResponse:
    """Ready when every engine has a live worker; reports crash-looping workers."""
    engines = runtime.engine_states()
    report = Readiness(ready=all(engine["live"] for engine in engines.values()), engines=engines)
    return JSONResponse(report.model_dump(), status_code=200 if report.ready else 503)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(state: CurrentState) -> Response:
    """Prometheus exposition."""
    exposition = state.metrics.exposition()
    return Response(exposition, media_type="text/plain; version=0.0.4; charset=utf-8")
