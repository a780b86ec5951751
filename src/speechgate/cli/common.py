"""What the command groups share: one console, settings from the environment with the
flags on top, and the check that a command's extra is installed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from importlib.util import find_spec
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from speechgate.metering.store import Store
from speechgate.settings import ENV_PREFIX, NESTED_DELIMITER, Settings

console = Console()
errors = Console(stderr=True)


def require_extra(extra: str, *modules: str) -> None:
    """Exit naming the extra to install when a command's optional packages are missing."""
    missing = [module for module in modules if find_spec(module) is None]
    if missing:
        console.print(
            f"[red]error:[/red] this command needs {', '.join(missing)}: "
            f"pip install 'speechgate\\[{extra}]'"  # escaped: rich would read [extra] as markup
        )
        raise typer.Exit(1)


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with the command-line flags that were given on top
    (a group's as a dict, e.g. `server={"port": port}`: a flag left out is None, and leaves
    the environment's value); invalid ones end the command with what is wrong with each, not a
    traceback."""
    try:
        return Settings(**_given(overrides))
    except ValidationError as error:
        for problem in error.errors():
            # A value error is a check of several fields, which its message names.
            one_field = problem["loc"] and problem["type"] != "value_error"
            where = NESTED_DELIMITER.join(str(part) for part in problem["loc"])
            name = f"{ENV_PREFIX}{where.upper()}" if one_field else "settings"
            given = f" (got {problem['input']!r})" if one_field else ""
            errors.print(f"[red]error:[/red] {name}: {escape(problem['msg'] + given)}")
        raise typer.Exit(2) from None


def _given(values: dict[str, Any]) -> dict[str, Any]:
    """`values` without the Nones, in groups too, and without the groups left empty."""
    given = {}
    for key, value in values.items():
        if isinstance(value, dict):
            value = _given(value) or None
        if value is not None:
            given[key] = value
    return given


def megabytes(size: int | None) -> str:
    return "" if size is None else f"{size / 1e6:,.1f} MB"


@contextlib.contextmanager
def open_store() -> Iterator[Store]:
    """The server's store (keys, usage, dictionaries), migrated, and closed when the command
    is done: a PostgreSQL server would otherwise see each command's connections dropped rather
    than closed."""
    store = Store(load_settings().store_url)
    try:
        store.migrate()
        yield store
    finally:
        store.close()


def show_table(table: Table) -> None:
    # Rich assumes 80 columns when stdout is not a terminal, too few for these tables.
    (console if console.is_terminal else Console(width=max(console.width, 160))).print(table)
