"""Imports point one way, down. `LAYERS` names speechgate's floors from the bottom up, and a
module may import its own floor and those below it, never one above. On top of that, the OpenAI
HTTP front end (`speechgate.api`) is imported by nothing but the command that serves it, and
its web framework by nothing outside it.

Read from the source with `ast`, so an import inside a function or under `TYPE_CHECKING` counts
too: a type a lower floor names in its annotations is a dependency all the same, and belongs
at or below it. A package's `__init__` is a module of its own, on its own floor; importing a
submodule does not count as importing the package that holds it.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping
from functools import cache
from pathlib import Path

import speechgate
from tests.helpers import pocket_modules

SOURCE = Path(speechgate.__file__).parent
PACKAGE = "speechgate"

# speechgate's floors, bottom first: (name, what it holds, its modules). A name stands for that
# module and every module under it; the longest name that covers a module decides its floor
# ("engines.kokoro" is the engine's declaration, "engines.kokoro.engine" its runtime). The
# package's own `__init__` (its version) is "__init__".
LAYERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "foundations",
        "values every floor speaks: errors, PCM and formats, text, word times, voice names and "
        "installed items, the neutral speech request; the request's trace, which every floor "
        "adds its spans to",
        (
            "__init__",
            "errors",
            "logs",
            "audio",
            "text",
            "timing",
            "captions",
            "speech_request",
            "voices",
            "tracing",
        ),
    ),
    (
        "declarations",
        "what the server is set up with and what each engine declares: the settings, the "
        "Engine contract, the plugins (no engine runtime)",
        (
            "settings",
            "engines.base",
            "engines.plugin",
            "engines.espeak",
            "engines.kokoro",
            "engines.piper",
            "engines.pocket",
        ),
    ),
    (
        "engines",
        "the engines themselves: text in, PCM out",
        (
            "engines",
            "engines.espeak.engine",
            "engines.kokoro.engine",
            "engines.piper.engine",
            "engines.pocket.engine",
            "lanes",
        ),
    ),
    (
        "execution",
        "jobs run in worker processes: PCM rendered and encoded",
        ("pipeline", "workers"),
    ),
    (
        "catalog",
        "which models and voices exist, how names resolve, what can be pulled, lexicons",
        ("catalog", "hub", "dictionaries"),
    ),
    (
        "metering",
        "keys, limits, usage records; the metrics and the recent requests",
        ("metering", "metrics", "activity"),
    ),
    (
        "routing",
        "providers (an upstream, or this server through a callable it is given), weighted "
        "choice, breakers, shadows",
        ("routing", "openai_upstream"),
    ),
    (
        "serving",
        "the one serving path: the lifecycle every front end calls (resolve, limit, admit, "
        "route, open, meter), plans and streams, sessions and their bounds; cloned voices",
        (
            "serving",
            "service",
            "phrase_cache",
            "phrase_store",
            "speech_session",
            "session_guard",
            "cloning",
        ),
    ),
    (
        "composition",
        "what is built from Settings: the runtime, the in-process synthesis, the HTTP server",
        ("runtime", "standalone", "startup_summary", "server"),
    ),
    ("front ends", "wire formats in, SpeechRequest out", ("api", "wyoming", "web")),
    ("commands", "the CLI, the benchmarks, the chat client", ("cli", "bench", "spoken_chat")),
)
API = "speechgate.api"
WEB_FRAMEWORKS = ("fastapi", "starlette")

# Modules outside `speechgate.api` that may import it, each with the reason. Keep it short.
MAY_IMPORT_API = {
    "speechgate.cli.serve_command": "`serve` builds the app (create_app): the composition root, "
    "above every front end",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SOURCE.rglob("*.py")):
        yield _module_name(path), path


def _tree(path: Path) -> ast.Module:
    """`path` parsed; each source is parsed once for all the tests that read it."""
    return _parsed(path.read_text(), str(path))


@cache
def _parsed(source: str, filename: str) -> ast.Module:
    # Keyed on the text itself: a file written by a test is never mistaken for another.
    return ast.parse(source, filename)


def _imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every module `module` imports (`from a import b` counts as a and a.b), with its line."""
    return iter(_imports_in(module, path.name == "__init__.py", _tree(path)))


@cache
def _imports_in(module: str, is_package: bool, tree: ast.Module) -> tuple[tuple[str, int], ...]:
    return tuple(_walk_imports(module, is_package, tree))


def _walk_imports(module: str, is_package: bool, tree: ast.Module) -> Iterator[tuple[str, int]]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
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
    assert {"speechgate.service", "speechgate.api.schemas", "speechgate.speech_request"} <= set(
        modules
    )


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
        "    from speechgate.api.access import Meter\n"
    )
    names = {name for name, _ in _imports("speechgate.wyoming.session", path)}
    assert {
        "speechgate.api.app",
        "speechgate.api",
        "speechgate.api.schemas.SpeechOptions",
        "speechgate.api.access.Meter",
    } <= names


def _floor(module: str) -> int | None:
    """The index in `LAYERS` of `module`'s floor; None when no name there covers it."""
    relative = "__init__" if module == PACKAGE else module.removeprefix(PACKAGE + ".")
    covering = [
        (len(name), floor)
        for floor, (_, _, names) in enumerate(LAYERS)
        for name in names
        if _within(relative, name)
    ]
    return max(covering)[1] if covering else None


def _module_named(name: str, modules: Collection[str]) -> str | None:
    """The module an imported name is or lives in (`speechgate.engines.discover` ->
    `speechgate.engines`); None for a name outside `modules`."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _upward_imports(module: str, path: Path, modules: Collection[str]) -> Iterator[str]:
    """Each import in `module` of a module on a higher floor, said in words."""
    floor = _floor(module)
    assert floor is not None, f"{module} is on no floor"
    seen: set[str] = set()
    for name, line in _imports(module, path):
        target = _module_named(name, modules)
        target_floor = None if target is None else _floor(target)
        if target is None or target_floor is None or target_floor <= floor or target in seen:
            continue
        seen.add(target)
        yield (
            f"{module} ({LAYERS[floor][0]}) imports {target} ({LAYERS[target_floor][0]}) "
            f"at line {line}"
        )


def test_every_module_is_on_a_floor() -> None:
    assert [module for module, _ in _modules() if _floor(module) is None] == [], (
        "Place these modules in LAYERS"
    )


def test_every_name_in_the_layers_is_a_module_on_one_floor() -> None:
    modules = dict(_modules())
    names = [name for _, _, floor in LAYERS for name in floor]
    assert [
        name for name in names if name != "__init__" and f"{PACKAGE}.{name}" not in modules
    ] == []
    assert len(names) == len(set(names))


def test_the_longest_name_decides_a_floor() -> None:
    floors = {
        module: LAYERS[floor][0]
        for module in (
            "speechgate",
            "speechgate.engines",
            "speechgate.engines.kokoro",
            "speechgate.engines.kokoro.engine",
            "speechgate.voices.installed",
        )
        if (floor := _floor(module)) is not None
    }
    assert floors == {
        "speechgate": "foundations",
        "speechgate.engines": "engines",
        "speechgate.engines.kokoro": "declarations",
        "speechgate.engines.kokoro.engine": "engines",
        "speechgate.voices.installed": "foundations",
    }


def test_no_import_points_to_a_higher_floor() -> None:
    modules = dict(_modules())
    upward = [
        found
        for module, path in modules.items()
        for found in _upward_imports(module, path, modules)
    ]
    assert upward == [], (
        "Imports point down: take what the lower module needs as a parameter or a protocol "
        "of its own floor, or move the code to the floor it belongs on\n" + "\n".join(upward)
    )


def test_an_import_of_a_higher_floor_is_found_in_any_form(tmp_path: Path) -> None:
    path = tmp_path / "extra.py"
    path.write_text(
        "from typing import TYPE_CHECKING\n"
        "from speechgate.errors import InvalidRequest\n"
        "from ..timing import WordTime\n"
        "if TYPE_CHECKING:\n"
        "    from speechgate.api.state import AppState\n"
        "def late():\n"
        "    from ..service import SpeechService\n"
    )
    modules = {*dict(_modules()), "speechgate.routing.extra"}
    assert list(_upward_imports("speechgate.routing.extra", path, modules)) == [
        "speechgate.routing.extra (routing) imports speechgate.api.state (front ends) at line 5",
        "speechgate.routing.extra (routing) imports speechgate.service (serving) at line 7",
    ]


def test_nothing_below_the_http_front_end_imports_it() -> None:
    offenders = {
        module: lines
        for module, lines in _offenders((API,)).items()
        if module not in MAY_IMPORT_API
    }
    assert offenders == {}, (
        "These modules import speechgate.api; take a protocol-neutral type "
        "(speechgate.speech_request.SpeechRequest) instead, and translate in the front end"
    )


def test_every_exception_is_still_needed() -> None:
    assert set(MAY_IMPORT_API) <= set(_offenders((API,)))


def test_the_web_framework_stays_in_the_http_front_end() -> None:
    assert _offenders(WEB_FRAMEWORKS) == {}


def _makes_a_router(tree: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "APIRouter"
        for node in ast.walk(tree)
    )


def _route_modules() -> dict[str, Path]:
    """The HTTP front end's route modules: those of `speechgate.api` that make an
    `APIRouter`."""
    return {
        module: path
        for module, path in _modules()
        if _within(module, API) and _makes_a_router(_tree(path))
    }


def _route_imports(routes: Mapping[str, Path], modules: Collection[str]) -> dict[str, list[str]]:
    """Route modules importing another route module: module -> 'line: name'."""
    found: dict[str, list[str]] = {}
    for module, path in routes.items():
        for name, line in _imports(module, path):
            target = _module_named(name, modules)
            if target is not None and target != module and target in routes:
                found.setdefault(module, []).append(f"{line}: {name}")
    return found


def test_the_route_modules_are_found() -> None:
    assert {
        "speechgate.api.openai_speech",
        "speechgate.api.elevenlabs",
        "speechgate.api.stream",
    } <= set(_route_modules())


def test_no_route_module_imports_another() -> None:
    routes = _route_modules()
    assert _route_imports(routes, dict(_modules())) == {}, (
        "What several routes share belongs in one module named for what it is "
        "(speechgate.api.http, speechgate.api.state), not in one of the routes"
    )


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
        module: list(_reads_app_state(_tree(path)))
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


def test_the_modules_given_to_one_process_for_pocket_tts_are_there() -> None:
    """A module renamed or moved would leave the group unnoticed, and cost its test process a
    pocket-tts import of its own again (tests/helpers/pocket_modules.py)."""
    missing = [name for name in pocket_modules.MODULES if not (TESTS.parent / name).is_file()]
    assert missing == []


def _module_name_under(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _prefixes(name: str) -> list[str]:
    """`a.b.c` -> [`a`, `a.b`, `a.b.c`]: an import of `tests.x.test_y.Z` names a test module."""
    parts = name.split(".")
    return [".".join(parts[: n + 1]) for n in range(len(parts))]
