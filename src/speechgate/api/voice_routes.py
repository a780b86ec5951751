"""Voice routes: list every voice, and clone, read and delete stored ones (OpenAI's shapes).

A key sees, speaks with and deletes only the voices it cloned (another key's are not found);
the admin key, and anyone on a server without keys, sees them all. A clone is admitted like a
speech request (the key's models, rate and concurrency) and leaves a usage record.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile

from speechgate.api.access import CurrentPrincipal
from speechgate.api.http import caller
from speechgate.api.schemas import (
    StoredVoiceCard,
    VoiceCard,
    VoiceDeleted,
    VoiceList,
    error_responses,
)
from speechgate.api.state import app_state, get_catalog, get_voices
from speechgate.catalog import Catalog
from speechgate.cloning.cloner import VoiceCloning
from speechgate.cloning.library import StoredVoice
from speechgate.errors import PayloadTooLarge
from speechgate.serving import Call
from speechgate.voices.naming import matches_filter

router = APIRouter()


@router.get("/v1/audio/voices", response_model=VoiceList, responses=error_responses(404))
async def list_voices(
    principal: CurrentPrincipal,
    catalog: Annotated[Catalog, Depends(get_catalog)],
    voices: Annotated[VoiceCloning, Depends(get_voices)],
    model: Annotated[str | None, Query(description="Only this model's voices.")] = None,
    language: Annotated[
        str | None,
        Query(
            description='Only voices of this language (BCP 47): "de" lists de-DE and de-AT, '
            '"en-GB" only en-GB. Cloned voices have no language.'
        ),
    ] = None,
) -> VoiceList:
    """Every voice, built-in, installed and cloned, with `id` and `name` (Open WebUI needs
    both)."""
    engines = [catalog.model(model).engine] if model else list(catalog.engines.values())
    names = {engine.name for engine in engines}
    builtin = [
        VoiceCard(
            id=voice.id,
            name=voice.name,
            model=engine.name,
            language=voice.language,
            quality=voice.quality,
            gender=voice.gender,
        )
        for engine in engines
        for voice in catalog.voices(engine.name)
        if language is None or matches_filter(voice.language, language)
    ]
    if language is not None:
        return VoiceList(voices=builtin)
    stored = [
        VoiceCard(
            id=voice.id,
            name=voice.name,
            model=voice.engine,
            type="audio_sample",
            created_at=voice.created_at,
        )
        for voice in voices.library.list(principal.key_id)
        if voice.engine in names
    ]
    return VoiceList(voices=builtin + stored)


@router.post(
    "/v1/audio/voices",
    response_model=StoredVoiceCard,
    summary="Clone a voice from an audio sample (OpenAI's multipart shape)",
    responses=error_responses(400, 403, 404, 409, 413, 429, 503),
)
async def create_voice(
    request: Request,
    principal: CurrentPrincipal,
    voices: Annotated[VoiceCloning, Depends(get_voices)],
    name: Annotated[str, Form(description="The new voice's name, unique.")],
    audio_sample: Annotated[
        UploadFile, File(description="A few seconds (3+) of one person speaking; 10 MiB at most.")
    ],
    consent: Annotated[str | None, Form(description="Accepted, as OpenAI's; not checked.")] = None,
    model: Annotated[
        str | None, Form(description="speechgate extension: the model to clone for.")
    ] = None,
) -> StoredVoiceCard:
    engine = voices.engine(model)
    # The key's model list names what clients send: the model asked for, or else the engine
    # that clones by default.
    call: Call = request.state.call
    await call.admit(caller(request), model or engine.name, name, engine.name)
    limit = app_state(request).settings.cloning.max_upload_bytes
    data = await audio_sample.read(limit + 1)
    if len(data) > limit:
        raise PayloadTooLarge(
            f"The audio sample is over the {limit}-byte limit.", param="audio_sample"
        )
    return _stored_card(await voices.create(name, data, engine, principal.key_id))


@router.get(
    "/v1/audio/voices/{voice_id}", response_model=StoredVoiceCard, responses=error_responses(404)
)
async def get_voice(
    voice_id: str, principal: CurrentPrincipal, voices: Annotated[VoiceCloning, Depends(get_voices)]
) -> StoredVoiceCard:
    return _stored_card(voices.library.get(voice_id, principal.key_id))


@router.delete(
    "/v1/audio/voices/{voice_id}", response_model=VoiceDeleted, responses=error_responses(404)
)
async def delete_voice(
    voice_id: str, principal: CurrentPrincipal, voices: Annotated[VoiceCloning, Depends(get_voices)]
) -> VoiceDeleted:
    return VoiceDeleted(id=(await voices.delete(voice_id, principal.key_id)).id)


def _stored_card(voice: StoredVoice) -> StoredVoiceCard:
    return StoredVoiceCard(
        id=voice.id, name=voice.name, created_at=voice.created_at, model=voice.engine
    )
