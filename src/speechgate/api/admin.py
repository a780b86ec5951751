"""The admin API (`/v1/admin/...`, the admin key only): manage API keys and their
pronunciation dictionaries; pull voices."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from speechgate.api.access import get_tenancy, require_admin
from speechgate.api.error_handlers import error_body
from speechgate.api.schemas import error_responses
from speechgate.api.state import app_state
from speechgate.errors import (
    InsufficientStorage,
    InvalidRequest,
    NotFound,
    PullFailed,
    SpeechgateError,
    disk_full,
)
from speechgate.metering.key_secrets import ApiKey, KeyLimits, check_limits
from speechgate.metering.records import aware_utc, naive_utc
from speechgate.metering.store import StoredDictionary
from speechgate.text.lexicon import InvalidLexicon, Lexicon

router = APIRouter(
    prefix="/v1/admin",
    dependencies=[Depends(require_admin)],
    responses=error_responses(400, 401, 403, 404),
)


class KeyLimitsBody(BaseModel):
    """A key's limits; a missing or null field means unlimited (all models)."""

    model_config = ConfigDict(extra="forbid")

    models: list[Annotated[str, Field(min_length=1)]] | None = None
    requests_per_second: float | None = Field(default=None, gt=0)
    burst: int | None = Field(default=None, ge=1)
    max_concurrent: int | None = Field(default=None, ge=1)
    monthly_characters: int | None = Field(default=None, ge=0)
    expires_at: datetime | None = Field(default=None, description="UTC.")


class KeyCreate(KeyLimitsBody):
    name: str = Field(min_length=1, max_length=200)


class KeyUpdate(KeyLimitsBody):
    """Only the fields sent change; send null to lift a limit."""

    name: str | None = Field(default=None, min_length=1, max_length=200)


class KeyInfo(KeyLimitsBody):
    model_config = ConfigDict(extra="ignore")

    id: str
    name: str
    hint: str = Field(description="The key's first characters, to tell keys apart.")
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey) -> KeyInfo:
        limits = key.limits
        return cls(
            id=key.id,
            name=key.name,
            hint=key.hint,
            created_at=aware_utc(key.created_at),
            revoked_at=aware_utc(key.revoked_at) if key.revoked_at else None,
            models=list(limits.models) if limits.models is not None else None,
            requests_per_second=limits.requests_per_second,
            burst=limits.burst,
            max_concurrent=limits.max_concurrent,
            monthly_characters=limits.monthly_characters,
            expires_at=aware_utc(limits.expires_at) if limits.expires_at else None,
        )


class KeyCreated(KeyInfo):
    key: str = Field(description="The secret: shown this once, never stored.")


class KeyList(BaseModel):
    data: list[KeyInfo]


def _limit_values(body: KeyLimitsBody, only_set: bool) -> dict[str, Any]:
    names = body.model_fields_set if only_set else KeyLimitsBody.model_fields.keys()
    values = {name: getattr(body, name) for name in names if name in KeyLimitsBody.model_fields}
    if values.get("models") is not None:
        values["models"] = tuple(values["models"])
    if values.get("expires_at") is not None:
        values["expires_at"] = naive_utc(values["expires_at"])
    return values


def _found(key: ApiKey | None, key_id: str) -> ApiKey:
    if key is None:
        raise NotFound(f"No API key with id {key_id!r}.", param="key_id", code="key_not_found")
    return key


@router.post(
    "/keys",
    response_model=KeyCreated,
    status_code=201,
    summary="Create an API key",
    responses=error_responses(507),
)
async def create_key(body: KeyCreate, request: Request) -> KeyCreated:
    tenancy = get_tenancy(request)
    limits = check_limits(KeyLimits(**_limit_values(body, only_set=False)))
    key, secret = await asyncio.to_thread(
        tenancy.store.create_key, body.name, limits, tenancy.now()
    )
    return KeyCreated(**KeyInfo.of(key).model_dump(), key=secret)


@router.get("/keys", response_model=KeyList, summary="List API keys (never their secrets)")
async def list_keys(request: Request) -> KeyList:
    keys = await asyncio.to_thread(get_tenancy(request).store.list_keys)
    return KeyList(data=[KeyInfo.of(key) for key in keys])


@router.get("/keys/{key_id}", response_model=KeyInfo, summary="One API key")
async def get_key(key_id: str, request: Request) -> KeyInfo:
    tenancy = get_tenancy(request)
    key = await asyncio.to_thread(tenancy.store.get_key, key_id)
    return KeyInfo.of(_found(key, key_id))


@router.patch("/keys/{key_id}", response_model=KeyInfo, summary="Change a key's name or limits")
async def update_key(key_id: str, body: KeyUpdate, request: Request) -> KeyInfo:
    tenancy = get_tenancy(request)
    current = _found(await asyncio.to_thread(tenancy.store.get_key, key_id), key_id)
    changes = _limit_values(body, only_set=True)
    check_limits(current.limits.changed(changes))
    key = await asyncio.to_thread(tenancy.store.update_key, key_id, changes, body.name)
    # Admin changes apply at once, not after the key cache's time to live.
    tenancy.forget_keys()
    return KeyInfo.of(_found(key, key_id))


@router.post("/keys/{key_id}/revoke", response_model=KeyInfo, summary="Revoke a key for good")
async def revoke_key(key_id: str, request: Request) -> KeyInfo:
    tenancy = get_tenancy(request)
    key = await asyncio.to_thread(tenancy.store.revoke_key, key_id, tenancy.now())
    tenancy.forget_keys()
    return KeyInfo.of(_found(key, key_id))


# --- a key's pronunciation dictionaries -----------------------------------------------------


class DictionaryCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=2000)
    rules: list[Any] = Field(
        description="Rules in ElevenLabs' shape: `{type: alias, string_to_replace, alias}` or "
        "`{type: phoneme, string_to_replace, phoneme, alphabet: ipa}`; optional "
        "`case_sensitive`, `word_boundaries` (default true)."
    )


class DictionaryInfo(BaseModel):
    id: str
    version_id: str
    key_id: str | None
    name: str
    description: str | None
    created_at: datetime
    rule_count: int

    @classmethod
    def of(cls, found: StoredDictionary) -> DictionaryInfo:
        return cls(
            id=found.id,
            version_id=found.version_id,
            key_id=found.key_id,
            name=found.name,
            description=found.description,
            created_at=aware_utc(found.created_at),
            rule_count=len(found.rules),
        )


class DictionaryRules(DictionaryInfo):
    """A dictionary with its rules."""

    rules: list[dict[str, Any]] = Field(description="In ElevenLabs' shape.")


class DictionaryList(BaseModel):
    data: list[DictionaryInfo]


class DictionaryDeleted(BaseModel):
    id: str
    deleted: bool = True


async def _key_of(request: Request, key_id: str) -> ApiKey:
    return _found(await asyncio.to_thread(get_tenancy(request).store.get_key, key_id), key_id)


async def _dictionary_of(request: Request, key_id: str, dictionary_id: str) -> StoredDictionary:
    await _key_of(request, key_id)
    store = get_tenancy(request).store
    found = await asyncio.to_thread(store.get_dictionary, dictionary_id, key_id)
    if found is None:
        raise NotFound(
            f"The key {key_id!r} has no pronunciation dictionary {dictionary_id!r}.",
            param="dictionary_id",
            code="pronunciation_dictionary_not_found",
        )
    return found


_DICTIONARIES = "/keys/{key_id}/pronunciation-dictionaries"


@router.get(_DICTIONARIES, response_model=DictionaryList, summary="A key's dictionaries")
async def list_dictionaries(key_id: str, request: Request) -> DictionaryList:
    await _key_of(request, key_id)
    found = await asyncio.to_thread(get_tenancy(request).store.list_dictionaries, key_id)
    return DictionaryList(data=[DictionaryInfo.of(dictionary) for dictionary in found])


@router.post(
    _DICTIONARIES,
    response_model=DictionaryRules,
    status_code=201,
    summary="Give a key a pronunciation dictionary",
)
async def create_dictionary(
    key_id: str, body: DictionaryCreate, request: Request
) -> DictionaryRules:
    await _key_of(request, key_id)
    try:
        lexicon = Lexicon.from_dicts(body.rules)
    except InvalidLexicon as error:
        raise InvalidRequest(
            f"Invalid pronunciation rules: {error}", param="rules", code="invalid_rules"
        ) from None
    tenancy = get_tenancy(request)
    stored = await asyncio.to_thread(
        tenancy.store.add_dictionary,
        key_id,
        body.name,
        body.description,
        lexicon.to_dicts(),
        tenancy.now(),
    )
    return DictionaryRules(**DictionaryInfo.of(stored).model_dump(), rules=stored.rules)


@router.get(
    _DICTIONARIES + "/{dictionary_id}",
    response_model=DictionaryRules,
    summary="One of a key's dictionaries, with its rules",
)
async def get_dictionary(key_id: str, dictionary_id: str, request: Request) -> DictionaryRules:
    found = await _dictionary_of(request, key_id, dictionary_id)
    return DictionaryRules(**DictionaryInfo.of(found).model_dump(), rules=found.rules)


@router.delete(
    _DICTIONARIES + "/{dictionary_id}",
    response_model=DictionaryDeleted,
    summary="Delete one of a key's dictionaries",
)
async def delete_dictionary(key_id: str, dictionary_id: str, request: Request) -> DictionaryDeleted:
    await _dictionary_of(request, key_id, dictionary_id)
    await asyncio.to_thread(get_tenancy(request).store.delete_dictionary, dictionary_id)
    # Requests naming it are refused from now on, not once the cached copy expires.
    app_state(request).service.dictionaries.forget(dictionary_id)
    return DictionaryDeleted(id=dictionary_id)


# --- voices and models pulled from the hub ------------------------------------------------


class PullBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ref: str = Field(
        min_length=1,
        max_length=200,
        description="piper:<voice key>, kokoro, or pocket:<config>.",
        examples=["piper:en_US-lessac-medium"],
    )


class PullableInfo(BaseModel):
    ref: str
    engine: str
    name: str
    languages: list[str]
    quality: str | None
    voices: int
    size_bytes: int | None
    installed: bool


class PullableList(BaseModel):
    data: list[PullableInfo]
    errors: dict[str, str] = Field(description="Engines whose index could not be read, and why.")


@router.get(
    "/voices/search", response_model=PullableList, summary="Voices and models that can be pulled"
)
async def search_voices(
    request: Request,
    language: Annotated[str | None, Query(description="BCP 47: de, en-GB, ...")] = None,
    engine: Annotated[str | None, Query(description="piper, kokoro or pocket.")] = None,
) -> PullableList:
    from speechgate.hub import Hub, Index, search

    settings = app_state(request).settings
    found = await asyncio.to_thread(
        search,
        Index(Hub.from_settings(settings)),
        settings.models_dir,
        language=language,
        engine=engine,
    )
    return PullableList(
        data=[
            PullableInfo(**{**vars(result), "languages": list(result.languages)})
            for result in found.results
        ],
        errors=found.errors,
    )


@router.post(
    "/voices/pull",
    summary="Pull a voice or model, streaming progress as NDJSON",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"application/x-ndjson": {}},
            "description": 'One JSON object a line: {"type": "progress", "file", "done", '
            '"total"} while downloading, then {"type": "installed", "ref", "voices"} or '
            '{"type": "error", "error": {...}}.',
        },
        **error_responses(502, 507),
    },
)
async def pull_voice(body: PullBody, request: Request) -> StreamingResponse:
    from speechgate.hub import Hub, Index
    from speechgate.hub.pull import install_pullable

    state = app_state(request)
    settings, runtime = state.settings, state.runtime
    hub = Hub.from_settings(settings)
    # Resolved before the response starts: an unknown ref is a 404, an unreachable hub a 502.
    item = await asyncio.to_thread(Index(hub).find, body.ref)
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    def emit(event: dict[str, Any] | None) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    def run() -> None:
        try:
            installed = install_pullable(
                item,
                models=settings.models_dir,
                hub=hub,
                progress=lambda p: emit(
                    {"type": "progress", "file": p.file, "done": p.done, "total": p.total}
                ),
            )
            # On the event loop, where the catalog lives, whether or not the client stayed.
            loop.call_soon_threadsafe(runtime.refresh_installed)
            voices = [voice.id for voice in installed.manifest.voices]
            emit({"type": "installed", "ref": installed.manifest.ref, "voices": voices})
        except SpeechgateError as error:
            emit({"type": "error", **error_body(error)})
        except Exception as error:  # the stream is under way: report, do not re-raise
            failure = (
                InsufficientStorage(f"Pulling {body.ref}")
                if disk_full(error)
                else PullFailed(f"The pull failed: {error}")
            )
            emit({"type": "error", **error_body(failure)})
        finally:
            emit(None)

    async def stream() -> Any:
        # The pull runs to its end even if the client leaves: a half-pulled item is never
        # installed, and a whole one is worth keeping.
        task = asyncio.create_task(asyncio.to_thread(run))
        try:
            while (event := await events.get()) is not None:
                yield json.dumps(event) + "\n"
        finally:
            await asyncio.shield(task)

    return StreamingResponse(stream(), media_type="application/x-ndjson")
