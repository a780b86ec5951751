"""mkdocs hook: the settings and command-line references, generated at every build from the
`Settings` model and the typer app, so neither can drift from the code.

`python scripts/docs_hooks.py settings|cli` prints one of them.
"""

from __future__ import annotations

import re
import sys
import typing
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from speechgate.cli import app
from speechgate.settings import MOVED, Settings

SETTINGS_PAGE = "settings.md"
CLI_PAGE = "cli.md"

_SETTINGS_INTRO = """# Settings

Every setting is an environment variable, read once at start-up by
`speechgate.settings.Settings`: `SPEECHGATE_<NAME>` for the few at the top level,
`SPEECHGATE_<GROUP>__<NAME>` (two underscores) for those in a group, e.g.
`SPEECHGATE_POOL__WORKERS` or `SPEECHGATE_LLM__BASE_URL`. Lists are comma-separated, tables
(dicts) JSON. `speechgate serve`'s flags override some of them (see the
[command line](cli.md)). An invalid value or combination stops the server at start-up, naming
the variable. The descriptions name a setting in a group as `group.name` (`pool.workers`);
code that builds `Settings` passes a group as a dict or as its model:
`Settings(pool={"workers": 2})`.

Each setting in a group also answers to a deprecated flat name, listed under it
(`SPEECHGATE_RAY_ADDRESS` for `SPEECHGATE_RAY__ADDRESS`): it still works, as a variable and as
a keyword argument of `Settings`, and logs a warning naming the new name once per process.

This page is generated from the settings model at each build of the docs.
"""

_CLI_INTRO = """# Command line

`speechgate` is installed with the package (`.venv/bin/speechgate` after `make serve`).
This page is generated from the command's own help at each build of the docs.
"""

_BOUNDS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def _type_name(annotation: Any) -> str:
    # `int`, not "<class 'int'>"; generics and unions as written.
    plain = None if typing.get_origin(annotation) else getattr(annotation, "__name__", None)
    text = plain or repr(annotation)
    text = re.sub(r"\b(typing|pathlib|pydantic\.types|pydantic)\.", "", text)
    text = re.sub(r"Annotated\[Path, PathType\(path_type='file'\)\]", "FilePath", text)
    text = re.sub(r"^Optional\[(.*)\]$", r"\1 | None", text)
    return text.replace("NoneType", "None")


def _bounds(field: FieldInfo) -> str:
    found = []
    for item in field.metadata:
        for name, sign in _BOUNDS.items():
            value = getattr(item, name, None)
            if value is not None:
                found.append(f"{sign} {value}")
    return ", ".join(found)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        # Tables and lists computed at start-up (the voice table, the installed engines) are
        # described in the text rather than printed.
        return f"`{value!r}`" if value in ({}, []) else "computed: see above"
    if field.default is PydanticUndefined:
        return "required"
    value = field.default
    if isinstance(value, Path):
        value = str(value).replace(str(Path.home()), "~", 1)
    if value is None or value == "":
        return "none"
    return f"`{value}`"


def _field_section(variable: str, field: FieldInfo, old: str | None) -> str:
    kind = _type_name(field.annotation)
    bounds = _bounds(field)
    description = (field.description or "").strip()
    deprecated = f"\n\nDeprecated name: `{old}`." if old else ""
    return (
        f"### `{variable}`\n\n{description}\n\n"
        f"Type `{kind}`{f' ({bounds})' if bounds else ''}; default {_default(field)}.{deprecated}\n"
    )


def _settings_sections(model: type[BaseSettings], prefix: str, delimiter: str) -> list[str]:
    old_names = {place: f"{prefix}{old.upper()}" for old, place in MOVED.items()}
    top: list[str] = []
    groups: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            top.append(_field_section(f"{prefix}{name.upper()}", field, None))
            continue
        summary = " ".join((annotation.__doc__ or "").split())
        groups.append(f"## `{name}`\n\n{summary}\n")
        for inner, inner_field in annotation.model_fields.items():
            variable = f"{prefix}{name.upper()}{delimiter}{inner.upper()}"
            groups.append(_field_section(variable, inner_field, old_names.get((name, inner))))
    return ["## Top level\n", *top, *groups]


def settings_reference() -> str:
    """The settings page: the top-level fields, then one section per group, each field with
    its variable (and its deprecated flat name), in the model's order."""
    prefix = Settings.model_config.get("env_prefix", "")
    delimiter = Settings.model_config.get("env_nested_delimiter") or "__"
    return "\n".join([_SETTINGS_INTRO, *_settings_sections(Settings, prefix, delimiter)])


def _command_sections(command: Any, path: list[str], parent: Any) -> list[str]:
    # Duck-typed: typer ships its own copy of click in some releases, plain click in others.
    ctx = command.context_class(command, info_name=path[-1], parent=parent)
    name = " ".join(path)
    help_text = (command.help or "").strip()
    lines = [f"{'#' * min(len(path) + 1, 4)} `{name}`\n"]
    if help_text:
        lines.append(f"{help_text}\n")
    lines.append(f"```\n{name} {' '.join(command.collect_usage_pieces(ctx))}\n```\n")
    records = [
        (param.param_type_name, param.get_help_record(ctx)) for param in command.get_params(ctx)
    ]
    for kind, title in (("argument", "Arguments"), ("option", "Options")):
        rows = [record for param_kind, record in records if param_kind == kind and record]
        if rows:
            lines.append(f"**{title}**\n")
            lines += [f"- `{usage}`: {text}".rstrip(": ") for usage, text in rows]
            lines.append("")
    sections = ["\n".join(lines)]
    if hasattr(command, "list_commands"):
        for sub in command.list_commands(ctx):
            child = command.get_command(ctx, sub)
            if child is not None and not child.hidden:
                sections += _command_sections(child, [*path, sub], ctx)
    return sections


def cli_reference() -> str:
    """The command-line page: every command and group, as its `--help` states it."""
    command = typer.main.get_command(app)
    return "\n".join([_CLI_INTRO, *_command_sections(command, ["speechgate"], None)])


def on_files(files: Any, config: Any) -> Any:
    """mkdocs' event: add the generated pages to the site's files before the nav is built."""
    from mkdocs.structure.files import File

    for page, render in ((SETTINGS_PAGE, settings_reference), (CLI_PAGE, cli_reference)):
        files.append(File.generated(config, page, content=render()))
    return files


if __name__ == "__main__":
    print({"settings": settings_reference, "cli": cli_reference}[sys.argv[1]]())
