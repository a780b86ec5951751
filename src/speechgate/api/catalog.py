"""Discovery routes: models and voices."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from speechgate.api.schemas import (
    AudioModelCard,
    AudioModelList,
    ModelCard,
    ModelList,
    VoiceCard,
    VoiceList,
    error_responses,
)
from speechgate.catalog import Catalog
from speechgate.runtime import Runtime

router = APIRouter()


# Dependencies are `async def` on purpose: FastAPI runs plain `def` ones in a thread pool,
# two thread hops per request for what is only an attribute read.
async def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_catalog(request: Request) -> Catalog:
    runtime: Runtime = request.app.state.runtime
    return runtime.catalog


@router.get("/v1/models", response_model=ModelList)
async def list_models(catalog: Annotated[Catalog, Depends(get_catalog)]) -> ModelList:
    return ModelList(data=[_card(model.id, model.engine.name) for model in catalog.models])


@router.get("/v1/models/{model_id}", response_model=ModelCard, responses=error_responses(404))
async def get_model(model_id: str, catalog: Annotated[Catalog, Depends(get_catalog)]) -> ModelCard:
    model = catalog.model(model_id)
    return _card(model.id, model.engine.name)


def _card(model_id: str, engine: str) -> ModelCard:
    return ModelCard(id=model_id, created=0, owned_by=f"speechgate/{engine}")


@router.get("/v1/audio/models", response_model=AudioModelList)
async def list_audio_models(catalog: Annotated[Catalog, Depends(get_catalog)]) -> AudioModelList:
    """The shape Open WebUI reads."""
    return AudioModelList(models=[AudioModelCard(id=model.id) for model in catalog.models])


@router.get("/v1/audio/voices", response_model=VoiceList, responses=error_responses(404))
async def list_voices(
    catalog: Annotated[Catalog, Depends(get_catalog)],
    model: Annotated[str | None, Query(description="Only this model's voices.")] = None,
) -> VoiceList:
    """Every voice, with `id` and `name` (Open WebUI needs both)."""
    engines = [catalog.model(model).engine] if model else list(catalog.engines.values())
    return VoiceList(
        voices=[
            VoiceCard(id=voice.id, name=voice.name, model=engine.name, language=voice.language)
            for engine in engines
            for voice in engine.voices
        ]
    )
