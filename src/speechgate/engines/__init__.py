"""Synthesis engines behind one protocol, built by name."""

from __future__ import annotations

from importlib import import_module

from speechgate.engines.base import Engine, EngineConfig, SynthesisRequest, Voice

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineUnavailable",
    "SynthesisRequest",
    "Voice",
    "engine_extra",
    "engine_module",
    "load_engine",
]

# Imported lazily: each pulls a heavy runtime. piper and espeak come with speechgate itself
# (no extra), kokoro and pocket with their extras.
_ENGINES: dict[str, tuple[str, str, str | None]] = {
    "piper": ("speechgate.engines.piper", "PiperEngine", None),
    "espeak": ("speechgate.engines.espeak", "EspeakEngine", None),
    "kokoro": ("speechgate.engines.kokoro", "KokoroEngine", "kokoro"),
    "pocket": ("speechgate.engines.pocket", "PocketEngine", "pocket"),
    "fake": ("speechgate.engines.fake", "FakeEngine", None),
}


class EngineUnavailable(RuntimeError):
    """An engine's optional dependencies are not installed."""


def engine_extra(name: str) -> str | None:
    """The pip extra that installs engine `name` (None: speechgate's own dependencies)."""
    return _ENGINES[name][2]


def engine_module(name: str) -> str:
    """The module that holds engine `name` (importing it imports the engine's runtime)."""
    return _ENGINES[name][0]


def load_engine(config: EngineConfig) -> Engine:
    """Build the engine `config` names, loading its model once."""
    module_name, class_name, extra = _ENGINES[config.name]
    try:
        module = import_module(module_name)
    except ImportError as error:
        install = f"pip install 'speechgate[{extra}]'" if extra else "reinstall speechgate"
        raise EngineUnavailable(
            f"engine {config.name!r} is not installed: {install} ({error})"
        ) from error
    engine: Engine = getattr(module, class_name).from_config(config)
    return engine
