"""Imports point one way: the OpenAI HTTP front end (`speechgate.api`) sits on top, and nothing
below it (the service, routing, workers, engines, the other front ends) imports it or its web
framework. Read from the source with `ast`, so an import inside a function or under
`TYPE_CHECKING` counts too."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import speechgate

SOURCE = Path(speechgate.__file__).parent
API = "speechgate.api"
WEB_FRAMEWORKS = ("fastapi", "starlette")

# Modules outside `speechgate.api` that may import it, each with the reason. Keep it short.
MAY_IMPORT_API = {
    "speechgate.cli.serve": "`serve` builds the app (create_app): the composition root, above "
    "every front end",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SOURCE.rglob("*.py")):
        yield _module_name(path), path


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every module `module` imports (`from a import b` counts as a and a.b), with its line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:
                yield f"{target}.{alias.name}", node.lineno


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _offenders(imported: tuple[str, ...]) -> dict[str, list[str]]:
    """Modules outside `speechgate.api` importing any of `imported`: module -> 'line: name'."""
    found: dict[str, list[str]] = {}
    for module, path in _modules():
        if _within(module, API):
            continue
        for name, line in _imports(module, path):
            if any(_within(name, package) for package in imported):
                found.setdefault(module, []).append(f"{line}: {name}")
    return found


def test_the_sources_are_found() -> None:
    modules = dict(_modules())
    assert {"speechgate.service", "speechgate.api.schemas", "speechgate.speech"} <= set(modules)


def test_the_import_reader_sees_every_form_of_import(tmp_path: Path) -> None:
    package = tmp_path / "speechgate" / "wyoming"
    package.mkdir(parents=True)
    path = package / "session.py"
    path.write_text(
        "import speechgate.api.app\n"
        "from speechgate import api\n"
        "from .. import api as front\n"
        "from ..api.schemas import SpeechOptions\n"
        "def late():\n"
        "    from speechgate.api.tenancy import Meter\n"
    )
    names = {name for name, _ in _imports("speechgate.wyoming.session", path)}
    assert {
        "speechgate.api.app",
        "speechgate.api",
        "speechgate.api.schemas.SpeechOptions",
        "speechgate.api.tenancy.Meter",
    } <= names


def test_nothing_below_the_http_front_end_imports_it() -> None:
    offenders = {
        module: lines
        for module, lines in _offenders((API,)).items()
        if module not in MAY_IMPORT_API
    }
    assert offenders == {}, (
        "These modules import speechgate.api; take a protocol-neutral type "
        "(speechgate.speech.SpeechRequest) instead, and translate in the front end"
    )


def test_every_exception_is_still_needed() -> None:
    assert set(MAY_IMPORT_API) <= set(_offenders((API,)))


def test_the_web_framework_stays_in_the_http_front_end() -> None:
    assert _offenders(WEB_FRAMEWORKS) == {}


def _reads_app_state(tree: ast.AST) -> Iterator[int]:
    """Lines reading Starlette's `app.state` (`app.state`, `request.app.state`,
    `scope["app"].state`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "state":
            owner = node.value
            if (
                (isinstance(owner, ast.Name) and owner.id == "app")
                or (isinstance(owner, ast.Attribute) and owner.attr == "app")
                or (
                    isinstance(owner, ast.Subscript)
                    and isinstance(owner.slice, ast.Constant)
                    and owner.slice.value == "app"
                )
            ):
                yield node.lineno


def test_the_app_state_is_read_only_through_its_typed_getters() -> None:
    readers = {
        module: list(_reads_app_state(ast.parse(path.read_text(), str(path))))
        for module, path in _modules()
        if module != "speechgate.api.state"
    }
    assert {module: lines for module, lines in readers.items() if lines} == {}, (
        "Read the running server's parts with speechgate.api.state.app_state (or CurrentState), "
        "not from untyped app.state attributes"
    )


TESTS = Path(__file__).parent


def _is_test_module(name: str) -> bool:
    """A module pytest loads itself: a test module or a conftest (importing either runs it a
    second time, under another name)."""
    last = name.rpartition(".")[2]
    return last.startswith("test_") or last == "conftest"


def test_no_test_module_imports_another() -> None:
    offenders: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        module = _module_name_under(path, TESTS.parent)
        for name, line in _imports(module, path):
            if _within(name, "tests") and any(map(_is_test_module, _prefixes(name))):
                offenders.setdefault(module, []).append(f"{line}: {name}")
    assert offenders == {}, "What test modules share belongs in tests/helpers"


def _module_name_under(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _prefixes(name: str) -> list[str]:
    """`a.b.c` -> [`a`, `a.b`, `a.b.c`]: an import of `tests.x.test_y.Z` names a test module."""
    parts = name.split(".")
    return [".".join(parts[: n + 1]) for n in range(len(parts))]
