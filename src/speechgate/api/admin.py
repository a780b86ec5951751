"""The admin API (`/v1/admin/...`, the admin key only): manage API keys."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from speechgate.api.schemas import error_responses
from speechgate.api.tenancy import get_tenancy, require_admin
from speechgate.errors import NotFound
from speechgate.metering.keys import ApiKey, KeyLimits, check_limits
from speechgate.metering.records import aware_utc, naive_utc

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


@router.post("/keys", response_model=KeyCreated, status_code=201, summary="Create an API key")
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
