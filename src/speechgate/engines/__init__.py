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
    "load_engine",
]

# Imported lazily: each engine lives in an optional extra and pulls a heavy runtime.
_ENGINES = {
    "piper": ("speechgate.engines.piper", "PiperEngine", "piper"),
    "espeak": ("speechgate.engines.espeak", "EspeakEngine", "espeak"),
    "kokoro": ("speechgate.engines.kokoro", "KokoroEngine", "kokoro"),
    "pocket": ("speechgate.engines.pocket", "PocketEngine", "pocket"),
}


class EngineUnavailable(RuntimeError):
    """An engine's optional dependencies are not installed."""


def load_engine(config: EngineConfig) -> Engine:
    """Build the engine `config` names, loading its model once."""
    module_name, class_name, extra = _ENGINES[config.name]
    try:
        module = import_module(module_name)
    except ImportError as error:
        raise EngineUnavailable(
            f"engine {config.name!r} needs the [{extra}] extra: pip install 'speechgate[{extra}]' "
            f"({error})"
        ) from error
    engine: Engine = getattr(module, class_name).from_config(config)
    return engine
