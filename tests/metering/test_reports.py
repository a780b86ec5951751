"""Report periods and prices."""

from __future__ import annotations

from datetime import datetime

import pytest

from speechgate.errors import InvalidRequest
from speechgate.metering.reports import Pricing, report_period
from speechgate.metering.store import UsageTotals

NOW = datetime(2026, 2, 10, 8, 30)


@pytest.mark.parametrize(
    ("period", "start", "end", "expected"),
    [
        (None, None, None, (datetime(2026, 2, 1), datetime(2026, 3, 1))),
        ("current_month", None, None, (datetime(2026, 2, 1), datetime(2026, 3, 1))),
        ("2025-12", None, None, (datetime(2025, 12, 1), datetime(2026, 1, 1))),
        (None, "2026-01-31", "2026-02-02", (datetime(2026, 1, 31), datetime(2026, 2, 2))),
        (None, "2026-01-31T22:00:00+02:00", None, (datetime(2026, 1, 31, 20), NOW)),
    ],
)
def test_periods(
    period: str | None, start: str | None, end: str | None, expected: tuple[datetime, datetime]
) -> None:
    assert report_period(period, start, end, NOW) == expected


@pytest.mark.parametrize(
    ("period", "start", "end", "param"),
    [
        ("2026-13", None, None, "period"),
        ("last_week", None, None, "period"),
        ("2026-01", "2026-01-01", None, "period"),
        (None, None, "2026-01-01", "start"),
        (None, "yesterday", None, "start"),
        (None, "2026-02-02", "2026-02-01", "end"),
    ],
)
def test_bad_periods_name_their_parameter(
    period: str | None, start: str | None, end: str | None, param: str
) -> None:
    with pytest.raises(InvalidRequest) as raised:
        report_period(period, start, end, NOW)
    assert raised.value.param == param


def totals(key: str | None, model: str, provider: str, chars: int, busy: float) -> UsageTotals:
    return UsageTotals(key, model, provider, 3, 1, 0, chars, 10.0, busy)


def test_costs_use_prices_compute_time_and_reference_prices() -> None:
    pricing = Pricing(
        prices={"remote/tts-1": 20.0, "tts-1": 1.0},
        compute_cost_per_hour=3.6,
        reference_prices={"OpenAI tts-1": 15.0},
    )
    rows = [
        totals("a", "tts-1", "local", 1_000_000, 100.0),
        totals("b", "tts-1", "local", 500_000, 0.0),
        totals("a", "tts-1", "remote", 1_000, 0.0),
        totals("a", "espeak", "local", 2_000, 10.0),
    ]
    report = pricing.report(rows, NOW, NOW, by_key=False)
    lines = {(line.model, line.provider): line for line in report.lines}
    local = lines[("tts-1", "local")]
    # 1.5M chars at $1/1M by model name, plus 100 s at $3.6/h.
    assert local.cost_usd == pytest.approx(1.5 + 0.1)
    assert local.characters == 1_500_000 and local.requests == 6
    assert local.reference_costs_usd == {"OpenAI tts-1": pytest.approx(22.5)}
    assert local.cost_per_1k_characters_usd == pytest.approx(1.6 / 1500)
    # provider/model beats the model's own price.
    assert lines[("tts-1", "remote")].cost_usd == pytest.approx(0.02)
    assert lines[("espeak", "local")].cost_usd == pytest.approx(0.01)
    assert report.total.characters == 1_503_000
    assert report.total.cost_usd == pytest.approx(1.6 + 0.02 + 0.01)

    by_key = pricing.report(rows, NOW, NOW, by_key=True)
    assert [(line.key_id, line.model, line.provider) for line in by_key.lines] == [
        ("a", "espeak", "local"),
        ("a", "tts-1", "local"),
        ("a", "tts-1", "remote"),
        ("b", "tts-1", "local"),
    ]


def test_no_characters_has_no_cost_per_1k() -> None:
    report = Pricing({}, 0.0, {}).report([], NOW, NOW)
    assert report.lines == [] and report.total.cost_per_1k_characters_usd is None
