"""`speechgate routing ...`: a running server's provider routing, through its admin API."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from speechgate.cli.common import console, load_settings

app = typer.Typer(help="Provider routing of a running server (needs its admin key).")

_URL_OPTION = typer.Option(help="speechgate server.")
_KEY_OPTION = typer.Option(help="Admin key [default: SPEECHGATE_AUTH__ADMIN_KEY].")


def _admin(method: str, path: str, url: str, admin_key: str | None, body: Any = None) -> None:
    """Call an admin route and print its JSON answer; exit 1 with the error on failure."""
    import httpx

    if admin_key is None:
        secret = load_settings().auth.admin_key
        admin_key = secret.get_secret_value() if secret else ""
    try:
        response = httpx.request(
            method,
            f"{url}/v1/admin/routing{path}",
            headers={"Authorization": f"Bearer {admin_key}"},
            json=body,
            timeout=30,
        )
    except httpx.HTTPError as error:
        console.print(f"[red]error:[/red] {url}: {error}")
        raise typer.Exit(1) from None
    if not response.is_success:
        message = response.json().get("error", {}).get("message", response.text)
        console.print(f"[red]error:[/red] {response.status_code} {message}")
        raise typer.Exit(1)
    console.print_json(response.text)


@app.command("show")
def routing_show(
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Routes, weights, and each provider's state and circuit breaker."""
    _admin("GET", "", url, admin_key)


@app.command("weights")
def routing_weights(
    model: Annotated[str, typer.Argument(help="The route's public model name.")],
    weights: Annotated[list[str], typer.Argument(help="PROVIDER=PERCENT, e.g. canary=25.")],
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Set weights, for the next request on (providers not named keep theirs)."""
    try:
        parsed = {name: float(value) for name, _, value in (w.partition("=") for w in weights)}
    except ValueError:
        raise typer.BadParameter("weights are PROVIDER=PERCENT", param_hint="WEIGHTS") from None
    _admin("PUT", f"/routes/{model}/weights", url, admin_key, {"weights": parsed})


@app.command("promote")
def routing_promote(
    model: Annotated[str, typer.Argument(help="The route's public model name.")],
    provider: Annotated[str, typer.Argument(help="Provider to take all of its traffic.")],
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Send all of a route's traffic to one provider; the others stay warm at 0 %."""
    _admin("POST", f"/routes/{model}/promote", url, admin_key, {"provider": provider})


@app.command("enable")
def routing_enable(
    provider: Annotated[str, typer.Argument()],
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Let a disabled provider take requests again."""
    _admin("POST", f"/providers/{provider}/enable", url, admin_key)


@app.command("disable")
def routing_disable(
    provider: Annotated[str, typer.Argument()],
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Send a provider no new requests (those under way finish)."""
    _admin("POST", f"/providers/{provider}/disable", url, admin_key)


@app.command("reload")
def routing_reload(
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Re-read the server's routes file (as `kill -HUP` does); runtime changes are dropped."""
    _admin("POST", "/reload", url, admin_key)


@app.command("shadow")
def routing_shadow(
    url: Annotated[str, _URL_OPTION] = "http://127.0.0.1:8000",
    admin_key: Annotated[str | None, _KEY_OPTION] = None,
) -> None:
    """Shadow comparisons: totals per route and the latest pairs."""
    _admin("GET", "/shadow", url, admin_key)
