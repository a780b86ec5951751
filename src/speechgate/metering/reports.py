"""Usage reports: totals per model and provider (optionally per key), priced.

Cost is what the operator says speechgate costs (`usage.prices` per 1M characters, default 0 for
local engines, plus `usage.compute_cost_per_hour` of request time); reference costs are what the
same characters would have cost at other services' list prices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time

from speechgate.errors import InvalidRequest
from speechgate.metering.limits import month_bounds
from speechgate.metering.records import aware_utc, naive_utc
from speechgate.metering.store import UsageTotals

_MILLION = 1_000_000


def report_period(
    period: str | None, start: str | None, end: str | None, now: datetime
) -> tuple[datetime, datetime]:
    """[start, end) in UTC from `period=current_month|YYYY-MM` or `start`/`end` (ISO dates or
    times; a date alone is its midnight; `end` defaults to now)."""
    if start is not None or end is not None:
        if period is not None:
            raise InvalidRequest("Give either period or start/end, not both.", param="period")
        if start is None:
            raise InvalidRequest("start is required with end.", param="start")
        begins = _instant(start, "start")
        ends = _instant(end, "end") if end is not None else now
        if ends <= begins:
            raise InvalidRequest("end must be after start.", param="end")
        return begins, ends
    if period in (None, "current_month"):
        return month_bounds(now)
    assert period is not None
    try:
        first = datetime.strptime(period, "%Y-%m")
    except ValueError:
        raise InvalidRequest(
            f"period must be current_month or YYYY-MM, not {period!r}.", param="period"
        ) from None
    return month_bounds(first)


def _instant(value: str, param: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        try:
            parsed = datetime.combine(date.fromisoformat(value), time())
        except ValueError:
            raise InvalidRequest(
                f"{param} must be an ISO 8601 date or time, not {value!r}.", param=param
            ) from None
    return naive_utc(parsed)


@dataclass(frozen=True)
class UsageLine:
    model: str
    provider: str
    requests: int
    errors: int
    aborted: int
    characters: int
    audio_seconds: float
    cost_usd: float
    cost_per_1k_characters_usd: float | None
    reference_costs_usd: dict[str, float]
    key_id: str | None = None


@dataclass(frozen=True)
class UsageReport:
    start: datetime
    end: datetime
    total: UsageLine
    lines: list[UsageLine]


class Pricing:
    def __init__(
        self,
        prices: Mapping[str, float],
        compute_cost_per_hour: float,
        reference_prices: Mapping[str, float],
    ) -> None:
        self.prices = dict(prices)
        self.compute_cost_per_hour = compute_cost_per_hour
        self.reference_prices = dict(reference_prices)

    def price(self, model: str, provider: str) -> float:
        return self.prices.get(f"{provider}/{model}", self.prices.get(model, 0.0))

    def line(
        self, totals: Iterable[UsageTotals], model: str, provider: str, key_id: str | None = None
    ) -> UsageLine:
        rows = list(totals)
        characters = sum(row.characters for row in rows)
        cost = sum(
            row.characters / _MILLION * self.price(row.model, row.provider)
            + row.busy_seconds / 3600 * self.compute_cost_per_hour
            for row in rows
        )
        return UsageLine(
            model=model,
            provider=provider,
            requests=sum(row.requests for row in rows),
            errors=sum(row.errors for row in rows),
            aborted=sum(row.aborted for row in rows),
            characters=characters,
            audio_seconds=sum(row.audio_seconds for row in rows),
            cost_usd=cost,
            cost_per_1k_characters_usd=cost / characters * 1000 if characters else None,
            reference_costs_usd={
                name: characters / _MILLION * price for name, price in self.reference_prices.items()
            },
            key_id=key_id,
        )

    def report(
        self,
        totals: list[UsageTotals],
        start: datetime,
        end: datetime,
        by_key: bool = False,
    ) -> UsageReport:
        groups: dict[tuple[str | None, str, str], list[UsageTotals]] = {}
        for row in totals:
            group = (row.key_id if by_key else None, row.model, row.provider)
            groups.setdefault(group, []).append(row)
        lines = [
            self.line(rows, model, provider, key_id)
            for (key_id, model, provider), rows in sorted(
                groups.items(), key=lambda item: tuple(part or "" for part in item[0])
            )
        ]
        return UsageReport(aware_utc(start), aware_utc(end), self.line(totals, "*", "*"), lines)
