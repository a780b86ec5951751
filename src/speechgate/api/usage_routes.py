"""`GET /v1/usage`: characters, audio, requests and cost over a period."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request

from speechgate.api.access import CurrentPrincipal, get_tenancy
from speechgate.api.schemas import error_responses
from speechgate.errors import PermissionDenied
from speechgate.metering.reports import UsageReport, report_period

router = APIRouter()


@router.get(
    "/v1/usage",
    summary="Usage and cost: your key's, or every key's with the admin key",
    response_model=UsageReport,
    responses=error_responses(400, 401, 403),
)
async def get_usage(
    request: Request,
    principal: CurrentPrincipal,
    period: Annotated[
        str | None, Query(description="current_month (default) or YYYY-MM, in UTC.")
    ] = None,
    start: Annotated[str | None, Query(description="ISO 8601 date or time (UTC).")] = None,
    end: Annotated[str | None, Query(description="ISO 8601; default: now.")] = None,
    group_by: Annotated[
        Literal["key"] | None, Query(description="`key`: one line per key (admin only).")
    ] = None,
) -> UsageReport:
    tenancy = get_tenancy(request)
    begins, ends = report_period(period, start, end, tenancy.now())
    if group_by == "key" and not principal.sees_all_usage:
        raise PermissionDenied("Only the admin key can see usage by key.", param="group_by")
    keys = None if principal.sees_all_usage else [principal.key_id or ""]
    # Records still waiting for their batch write count too.
    if tenancy.recorder is not None:
        await tenancy.recorder.flush()
    totals = await asyncio.to_thread(tenancy.store.usage_totals, begins, ends, keys)
    return tenancy.pricing.report(totals, begins, ends, by_key=group_by == "key")
