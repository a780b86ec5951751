"""Discovery routes: models."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from speechgate.api.schemas import (
    AudioModelCard,
    AudioModelList,
    ModelCard,
    ModelList,
    error_responses,
)
from speechgate.api.state import get_catalog
from speechgate.catalog import Catalog, Model

router = APIRouter()


@router.get("/v1/models", response_model=ModelList)
async def list_models(catalog: Annotated[Catalog, Depends(get_catalog)]) -> ModelList:
    return ModelList(data=[_card(model) for model in catalog.models])


@router.get("/v1/models/{model_id}", response_model=ModelCard, responses=error_responses(404))
async def get_model(model_id: str, catalog: Annotated[Catalog, Depends(get_catalog)]) -> ModelCard:
    return _card(catalog.model(model_id))


def _card(model: Model) -> ModelCard:
    return ModelCard(
        id=model.id,
        created=0,
        owned_by=f"speechgate/{model.engine.name}",
        cloning=model.engine.can_clone,
    )


@router.get("/v1/audio/models", response_model=AudioModelList)
async def list_audio_models(catalog: Annotated[Catalog, Depends(get_catalog)]) -> AudioModelList:
    """The shape Open WebUI reads."""
    return AudioModelList(models=[AudioModelCard(id=model.id) for model in catalog.models])
