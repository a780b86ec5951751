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
from speechgate.settings import Settings

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
    """Settings from the environment, with the command-line flags that were given on top;
    invalid ones end the command with what is wrong with each, not a traceback."""
    try:
        return Settings(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as error:
        for problem in error.errors():
            where = ".".join(str(part) for part in problem["loc"])
            name = f"SPEECHGATE_{where.upper()}" if where else "settings"
            given = f" (got {problem['input']!r})" if where else ""
            errors.print(f"[red]error:[/red] {name}: {escape(problem['msg'] + given)}")
        raise typer.Exit(2) from None


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
