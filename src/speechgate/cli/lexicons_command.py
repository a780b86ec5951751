"""`speechgate lexicons ...`: a key's pronunciation dictionaries, straight from the store.

They open the same store as the server, as `speechgate keys` does. A running server finds a
dictionary added here on the first request naming it; one deleted here stops applying within
a minute (`speechgate.dictionaries.CACHE_SECONDS`), at once when deleted through the API.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from speechgate.cli.common import console, open_store, show_table
from speechgate.metering.store import StoredDictionary
from speechgate.metering.tenancy import utc_now
from speechgate.text.lexicon import InvalidLexicon, load_lexicon

app = typer.Typer(
    help="A key's pronunciation dictionaries: list, add from a file, show, delete.",
    no_args_is_help=True,
)

Key = Annotated[
    str | None,
    typer.Option(
        "--key", help="The key's id (key_...) [default: dictionaries made without a key]."
    ),
]
DictionaryId = Annotated[str, typer.Argument(help="The dictionary's id (pd_...).")]


def _table(dictionaries: list[StoredDictionary]) -> Table:
    table = Table("id", "version", "key", "name", "rules", "created")
    for found in dictionaries:
        table.add_row(
            found.id,
            found.version_id,
            found.key_id or "-",
            found.name,
            str(len(found.rules)),
            f"{found.created_at:%Y-%m-%d %H:%M}",
        )
    return table


def _missing(dictionary_id: str, key: str | None) -> typer.Exit:
    owner = f"the key {key!r}" if key else "no key"
    console.print(f"[red]error:[/red] {owner} has no pronunciation dictionary {dictionary_id!r}")
    return typer.Exit(1)


@app.command("list")
def list_dictionaries(key: Key = None) -> None:
    """A key's dictionaries."""
    with open_store() as store:
        show_table(_table(store.list_dictionaries(key)))


@app.command("add")
def add(
    file: Annotated[
        Path,
        typer.Option(
            "--file",
            exists=True,
            dir_okay=False,
            help="Rules: JSON or YAML in ElevenLabs' shape, or a PLS file (.pls, .xml).",
        ),
    ],
    key: Key = None,
    name: Annotated[str | None, typer.Option(help="[default: the file's name]")] = None,
    description: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Give a key a dictionary; requests use it by naming its id."""
    try:
        lexicon = load_lexicon(file)
    except InvalidLexicon as error:
        console.print(f"[red]error:[/red] {error}")
        raise typer.Exit(1) from None
    with open_store() as store:
        if key is not None and store.get_key(key) is None:
            console.print(f"[red]error:[/red] no key with id {key!r}")
            raise typer.Exit(1)
        made = store.add_dictionary(
            key, name or file.stem, description, lexicon.to_dicts(), utc_now()
        )
    show_table(_table([made]))


@app.command("show")
def show(dictionary_id: DictionaryId, key: Key = None) -> None:
    """A dictionary's rules, as JSON (what `add --file` takes back)."""
    with open_store() as store:
        found = store.get_dictionary(dictionary_id, key)
    if found is None:
        raise _missing(dictionary_id, key)
    # Bare, without markup: to be piped to a file.
    print(json.dumps(found.rules, ensure_ascii=False, indent=2))


@app.command("delete")
def delete(dictionary_id: DictionaryId, key: Key = None) -> None:
    """Delete a key's dictionary."""
    with open_store() as store:
        if store.get_dictionary(dictionary_id, key) is None:
            raise _missing(dictionary_id, key)
        store.delete_dictionary(dictionary_id)
    console.print(f"deleted {dictionary_id}")
