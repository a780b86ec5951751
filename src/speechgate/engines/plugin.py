"""What speechgate knows about an engine, declared by the engine: one `EnginePlugin` each.

Engines are found through the Python entry-point group `speechgate.engines` (`discover`):
speechgate declares its own (piper, espeak, kokoro, pocket, fake) in its pyproject.toml, and a
separately installed package adds one by declaring

    [project.entry-points."speechgate.engines"]
    tone = "speechgate_tone_engine:PLUGIN"

with no edit to speechgate (docs/engines.md). A plugin's module must import no engine runtime
(onnxruntime, torch): every `Settings` reads every plugin. `factory` names the engine, imported
only by the processes that load it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from speechgate.voices.naming import OPENAI_VOICES

if TYPE_CHECKING:
    from speechgate.engines.base import Engine, EngineConfig

ENTRY_POINT_GROUP = "speechgate.engines"

log = logging.getLogger(__name__)


class EngineUnavailable(RuntimeError):
    """An engine's optional dependencies are not installed."""


@dataclass(frozen=True)
class PullRefs:
    """How `speechgate voices pull <engine>:<item>` names what can be pulled for an engine;
    offline, so an error can name the exact pull command without asking the hub."""

    usage: str
    """The reference's form, for the error a malformed one gets."""

    item: Callable[[str], str | None]
    """The canonical item for the part after `<engine>:`, or None if not this engine's."""

    for_voice: Callable[[str], str | None] = lambda voice: None
    """The reference that installs a voice, if its id alone says which."""

    for_known_voice: Callable[[str], str | None] = lambda voice: None
    """The reference that installs a voice (lower case) a release of the engine's model
    ships, installed here or not: what a client of another server names."""

    model: str | None = None
    """The reference that installs the engine's default model (None: it has none to pull)."""

    voices_come_with_model: bool = False
    """A voice `for_voice` cannot place is installed by pulling `model`."""

    bare_item: str | None = None
    """The one item the engine's id alone refers to ("kokoro" -> "kokoro-v1.0")."""

    search_hint: str = "{search} lists the voices that can be pulled for the other engines."
    """How to find a voice of a language; `{search}` is the search command."""

    def ref(self, engine: str, item: str) -> str:
        return (
            engine if self.bare_item is not None and item == self.bare_item else f"{engine}:{item}"
        )


@dataclass(frozen=True)
class EnginePlugin:
    """Everything speechgate knows about one engine; the entry point names it."""

    id: str
    """The engine's id: what `SPEECHGATE_ENGINES` lists and the model id clients may send."""

    display_name: str
    """Its name for people ("Piper"): the Wyoming description's attribution."""

    description: str

    factory: str
    """`module:Class` of the engine, whose `from_config(EngineConfig)` builds it."""

    url: str | None = None
    """For Wyoming's attribution; None: speechgate's."""

    requires: tuple[str, ...] = ()
    """Top-level modules whose presence means the engine is installed (found, not imported:
    importing torch takes seconds)."""

    extra: str | None = None
    """speechgate's pip extra that installs the engine's runtime (None: none is needed)."""

    package: str = ""
    """Filled in by `discover`."""

    default: bool = True
    """Loaded by default when installed (`SPEECHGATE_ENGINES` unset); the fake engine is not."""

    rank: int = 100
    """Order among default engines, lower first: the first is what OpenAI's model names mean."""

    model_aliases: tuple[str, ...] = ()
    """Other servers' model names that mean this engine ("kokoro-82m"), where it is loaded."""

    voice_aliases: Mapping[str, str] = field(default_factory=dict)
    """Voice names clients may send ("alloy", "de_male") -> the engine's voice id."""

    options: Mapping[str, str] | None = None
    """The engine options it takes: name -> what it does; others are refused at start-up.
    None: the engine checks them."""

    ready: Callable[[Path, Mapping[str, str] | None], bool] | None = None
    """Whether an installed engine can be loaded by default, given the models directory and
    its options (pocket-tts ships no weights). None: always."""

    preload: tuple[str, ...] | None = None
    """Modules the fork server imports for the engine's workers (None: `factory`'s module)."""

    pull: PullRefs | None = None
    """What `speechgate voices pull` fetches for it (None: nothing)."""

    @property
    def module(self) -> str:
        return self.factory.partition(":")[0]

    @property
    def preloaded_modules(self) -> tuple[str, ...]:
        return self.preload if self.preload is not None else (self.module,)

    @property
    def install_hint(self) -> str:
        if self.extra:
            return f"pip install 'speechgate[{self.extra}]'"
        return f"reinstall {self.package or 'speechgate'}"

    def installed(self) -> bool:
        return all(find_spec(module) is not None for module in self.requires)

    def check_options(self, options: Mapping[str, str]) -> None:
        if self.options is None:
            return
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            takes = sorted(self.options) if self.options else "no options"
            raise ValueError(f"engine {self.id!r} takes {takes}, not {unknown}")

    def load(self, config: EngineConfig) -> Engine:
        module_name, _, name = self.factory.partition(":")
        try:
            module = import_module(module_name)
        except ImportError as error:
            raise EngineUnavailable(
                f"engine {self.id!r} is not installed: {self.install_hint} ({error})"
            ) from error
        engine: Engine = getattr(module, name).from_config(config)
        return engine


def generic_aliases(table: Mapping[str, str]) -> dict[str, str]:
    """Generic voice names from `table` ("de_de_male" -> voice id): the table, each language
    without its region (first region wins), and "male"/"female" for American English."""
    aliases = dict(table)
    for name, voice in table.items():
        parts = name.split("_")
        if len(parts) == 3:
            aliases.setdefault(f"{parts[0]}_{parts[2]}", voice)
    for gender in ("male", "female"):
        if f"en_us_{gender}" in table:
            aliases[gender] = table[f"en_us_{gender}"]
    return aliases


def openai_aliases(*voices: str) -> dict[str, str]:
    """OpenAI's voice names onto `voices` in turn, so that clients switching voices hear a
    difference: ("a", "b") gives alloy -> a, ash -> b, ballad -> a, ..."""
    return {name: voices[index % len(voices)] for index, name in enumerate(OPENAI_VOICES)}


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


@functools.cache
def discover() -> Mapping[str, EnginePlugin]:
    """Every installed engine plugin by id, default ones first by `rank`; cached per process.
    A plugin that fails to load is left out and logged."""
    found: dict[str, EnginePlugin] = {}
    for entry in _entry_points():
        try:
            plugin = entry.load()
        except Exception as error:
            log.warning("engine plugin %r (%s) failed to load: %s", entry.name, entry.value, error)
            continue
        if not isinstance(plugin, EnginePlugin):
            log.warning("engine plugin %r (%s) is not an EnginePlugin", entry.name, entry.value)
            continue
        if plugin.id != entry.name:
            log.warning(
                "engine plugin %r (%s) says its id is %r", entry.name, entry.value, plugin.id
            )
            continue
        if plugin.id in found:
            log.warning("engine plugin %r is declared twice; %s ignored", plugin.id, entry.value)
            continue
        found[plugin.id] = replace(plugin, package=entry.dist.name if entry.dist else "")
    ordered = sorted(found.values(), key=lambda p: (not p.default, p.rank, p.id))
    return {plugin.id: plugin for plugin in ordered}


def engine_plugin(name: str) -> EnginePlugin:
    """The installed plugin of engine `name`; KeyError naming the installed ones if none."""
    plugins = discover()
    if name not in plugins:
        raise KeyError(f"no engine {name!r} is installed; installed: {list(plugins)}")
    return plugins[name]
