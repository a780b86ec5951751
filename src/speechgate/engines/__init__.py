"""Synthesis engines behind one protocol, each declared by its plugin (`plugin.EnginePlugin`)
and found through the `speechgate.engines` entry points.

The protocol's types are imported on first use: reading the plugins (what `Settings` does)
imports no engine code, nor numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from speechgate.engines.plugin import (
    EnginePlugin,
    EngineUnavailable,
    discover,
    engine_plugin,
)

if TYPE_CHECKING:
    from speechgate.engines.base import Engine, EngineConfig, SynthesisRequest, Voice

__all__ = [
    "Engine",
    "EngineConfig",
    "EnginePlugin",
    "EngineUnavailable",
    "SynthesisRequest",
    "Voice",
    "discover",
    "engine_plugin",
    "load_engine",
]

_FROM_BASE = frozenset({"Engine", "EngineConfig", "SynthesisRequest", "Voice"})


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from speechgate.engines import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_engine(config: EngineConfig) -> Engine:
    try:
        found = engine_plugin(config.name)
    except KeyError as error:
        raise EngineUnavailable(error.args[0]) from None
    return found.load(config)
