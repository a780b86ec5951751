"""`speechgate keys ...` and `speechgate usage`: the store, straight from the command line.

They open the same store as the server (SPEECHGATE_STORE__DATABASE_URL, or SQLite in the data
directory). A running server sees changes made here within `auth.key_cache_ttl` seconds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from speechgate.cli.common import load_settings, open_store, show_table
from speechgate.errors import SpeechgateError
from speechgate.metering.key_secrets import ApiKey, KeyLimits, check_limits
from speechgate.metering.records import naive_utc
from speechgate.metering.reports import Pricing, UsageReport, report_period
from speechgate.metering.tenancy import utc_now

keys_app = typer.Typer(help="Create, list, change and revoke API keys.", no_args_is_help=True)
console = Console()

# Option name -> KeyLimits field, for `keys update --unset`.
_UNSETTABLE = {
    "models": "models",
    "rps": "requests_per_second",
    "burst": "burst",
    "max-concurrent": "max_concurrent",
    "monthly-chars": "monthly_characters",
    "expires": "expires_at",
}

Models = Annotated[
    str | None, typer.Option(help="Models the key may use, comma-separated [default: all].")
]
Rps = Annotated[float | None, typer.Option("--rps", min=0.001, help="Requests per second.")]
Burst = Annotated[int | None, typer.Option(min=1, help="Requests at once above --rps.")]
MaxConcurrent = Annotated[int | None, typer.Option(min=1, help="Requests in flight at most.")]
MonthlyChars = Annotated[
    int | None, typer.Option("--monthly-chars", min=0, help="Input characters per month (UTC).")
]
Expires = Annotated[datetime | None, typer.Option(help="When the key stops working (UTC).")]


def _limit_options(**options: Any) -> dict[str, Any]:
    values = {
        "models": tuple(m.strip() for m in options["models"].split(",") if m.strip())
        if options["models"] is not None
        else None,
        "requests_per_second": options["rps"],
        "burst": options["burst"],
        "max_concurrent": options["max_concurrent"],
        "monthly_characters": options["monthly_chars"],
        "expires_at": naive_utc(options["expires"]) if options["expires"] else None,
    }
    return {name: value for name, value in values.items() if value is not None}


def _fail(error: SpeechgateError) -> typer.Exit:
    console.print(f"[red]error:[/red] {error.message}")
    return typer.Exit(1)


def _keys_table(keys: list[ApiKey]) -> Table:
    table = Table(
        "id",
        "name",
        "key",
        "models",
        "rps/burst",
        "concurrent",
        "chars/month",
        "expires",
        "created",
        "revoked",
    )
    for key in keys:
        limits = key.limits
        table.add_row(
            key.id,
            key.name,
            key.hint,
            ",".join(limits.models) if limits.models is not None else "all",
            f"{limits.requests_per_second:g}/{limits.burst or '-'}"
            if limits.requests_per_second
            else "-",
            str(limits.max_concurrent or "-"),
            str(limits.monthly_characters if limits.monthly_characters is not None else "-"),
            f"{limits.expires_at:%Y-%m-%d %H:%M}" if limits.expires_at else "-",
            f"{key.created_at:%Y-%m-%d %H:%M}",
            f"{key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "",
        )
    return table


@keys_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Who or what the key is for.")],
    models: Models = None,
    rps: Rps = None,
    burst: Burst = None,
    max_concurrent: MaxConcurrent = None,
    monthly_chars: MonthlyChars = None,
    expires: Expires = None,
) -> None:
    """Make a key. Its secret is printed this once; only a hash of it is kept."""
    try:
        limits = check_limits(
            KeyLimits(
                **_limit_options(
                    models=models,
                    rps=rps,
                    burst=burst,
                    max_concurrent=max_concurrent,
                    monthly_chars=monthly_chars,
                    expires=expires,
                )
            )
        )
    except SpeechgateError as error:
        raise _fail(error) from None
    with open_store() as store:
        key, secret = store.create_key(name, limits, utc_now())
    show_table(_keys_table([key]))
    console.print("Secret (shown once, store it now):")
    # Printed bare, without markup, so that it can be copied or piped as it is.
    print(secret)


@keys_app.command("list")
def list_keys() -> None:
    """Every key with its limits (never the secrets)."""
    with open_store() as store:
        show_table(_keys_table(store.list_keys()))


@keys_app.command("revoke")
def revoke(key_id: Annotated[str, typer.Argument(help="The key's id (key_...).")]) -> None:
    """Stop a key for good."""
    with open_store() as store:
        key = store.revoke_key(key_id, utc_now())
    if key is None:
        console.print(f"[red]error:[/red] no key with id {key_id!r}")
        raise typer.Exit(1)
    show_table(_keys_table([key]))


@keys_app.command("update")
def update(
    key_id: Annotated[str, typer.Argument(help="The key's id (key_...).")],
    name: Annotated[str | None, typer.Option(help="A new name.")] = None,
    models: Models = None,
    rps: Rps = None,
    burst: Burst = None,
    max_concurrent: MaxConcurrent = None,
    monthly_chars: MonthlyChars = None,
    expires: Expires = None,
    unset: Annotated[
        list[str] | None,
        typer.Option(help=f"Lift a limit (repeatable): {', '.join(_UNSETTABLE)}."),
    ] = None,
) -> None:
    """Change a key's name or limits; the others stay as they are."""
    changes = _limit_options(
        models=models,
        rps=rps,
        burst=burst,
        max_concurrent=max_concurrent,
        monthly_chars=monthly_chars,
        expires=expires,
    )
    for option in unset or []:
        if option not in _UNSETTABLE:
            raise typer.BadParameter(f"cannot unset {option!r}", param_hint="--unset")
        changes[_UNSETTABLE[option]] = None
    with open_store() as store:
        current = store.get_key(key_id)
        if current is None:
            console.print(f"[red]error:[/red] no key with id {key_id!r}")
            raise typer.Exit(1)
        try:
            check_limits(current.limits.changed(changes))
        except SpeechgateError as error:
            raise _fail(error) from None
        key = store.update_key(key_id, changes, name)
    assert key is not None
    show_table(_keys_table([key]))


def usage_table(report: UsageReport) -> Table:
    """The report as `speechgate usage` prints it."""
    references = list(report.total.reference_costs_usd)
    table = Table(
        "key",
        "model",
        "provider",
        "requests",
        "errors",
        "aborted",
        "characters",
        "audio s",
        "cost $",
        "$/1k chars",
        *(f"at {name} $" for name in references),
        title=f"Usage {report.start:%Y-%m-%d %H:%M} .. {report.end:%Y-%m-%d %H:%M} UTC",
    )
    for line in [*report.lines, report.total]:
        per_1k = line.cost_per_1k_characters_usd
        table.add_row(
            line.key_id or ("all" if line is report.total else "-"),
            line.model,
            line.provider,
            str(line.requests),
            str(line.errors),
            str(line.aborted),
            str(line.characters),
            f"{line.audio_seconds:.1f}",
            f"{line.cost_usd:.4f}",
            f"{per_1k:.4f}" if per_1k is not None else "-",
            *(f"{line.reference_costs_usd[name]:.4f}" for name in references),
            end_section=line is report.lines[-1] if report.lines else False,
        )
    return table


def usage(
    period: Annotated[
        str | None, typer.Option(help="current_month (default) or YYYY-MM, UTC.")
    ] = None,
    start: Annotated[str | None, typer.Option(help="ISO 8601 date or time, UTC.")] = None,
    end: Annotated[str | None, typer.Option(help="ISO 8601 date or time [default: now].")] = None,
    by_key: Annotated[bool, typer.Option(help="One line per key.")] = False,
) -> None:
    """Characters, audio, requests and cost per model, with reference prices."""
    settings = load_settings()
    try:
        begins, ends = report_period(period, start, end, utc_now())
    except SpeechgateError as error:
        raise _fail(error) from None
    with open_store() as store:
        totals = store.usage_totals(begins, ends)
    pricing = Pricing(
        settings.usage.prices, settings.usage.compute_cost_per_hour, settings.usage.reference_prices
    )
    show_table(usage_table(pricing.report(totals, begins, ends, by_key=by_key)))
