"""Piper: the embedded default engine (en_US-joe-medium) and every Piper voice pulled.

The engine is in `engine`, which imports piper and onnxruntime.
"""

from __future__ import annotations

import re

from speechgate.engines.plugin import EnginePlugin, PullRefs, generic_aliases
from speechgate.voices.naming import OPENAI_VOICES

# A default voice key of rhasspy/piper-voices per language and gender.
GENERIC = {
    "en_us_male": "en_US-joe-medium",
    "en_us_female": "en_US-lessac-medium",
    "en_gb_male": "en_GB-alan-medium",
    "en_gb_female": "en_GB-jenny_dioco-medium",
    "de_de_male": "de_DE-thorsten-medium",
    "de_de_female": "de_DE-kerstin-low",
    "fr_fr_male": "fr_FR-tom-medium",
    "fr_fr_female": "fr_FR-siwis-medium",
    "es_es_male": "es_ES-davefx-medium",
    "es_mx_male": "es_MX-ald-medium",
    "es_mx_female": "es_MX-claude-high",
    "it_it_male": "it_IT-riccardo-x_low",
    "it_it_female": "it_IT-paola-medium",
}

_KEY = re.compile(r"[a-z]{2,3}_[A-Z]{2}-[A-Za-z0-9_]+-(x_low|low|medium|high)")
_ITEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


def _voice_ref(voice: str) -> str | None:
    """A Piper voice key ("en_US-lessac-medium", optionally "#speaker") is its own item."""
    key = voice.partition("#")[0]
    return f"piper:{key}" if _KEY.fullmatch(key) else None


PLUGIN = EnginePlugin(
    id="piper",
    display_name="Piper",
    description="Piper (VITS on onnxruntime): fast neural voices in many languages.",
    factory="speechgate.engines.piper.engine:PiperEngine",
    url="https://github.com/OHF-Voice/piper1-gpl",
    requires=("piper",),
    rank=0,
    voice_aliases={
        **dict.fromkeys(OPENAI_VOICES, "en_US-joe-medium"),
        **generic_aliases(GENERIC),
    },
    options={
        "model": "a local .onnx with its .onnx.json beside it, instead of the embedded voice",
        "memory_pattern": "onnxruntime's memory pattern (true/false)",
        "wide_spinning": "onnxruntime's threads spin while waiting (true/false)",
        "cpu_arena": "onnxruntime's CPU arena: shared, session or off",
    },
    pull=PullRefs(
        usage="piper:<voice key> (e.g. piper:en_US-lessac-medium)",
        item=lambda name: name if _ITEM.fullmatch(name) else None,
        for_voice=_voice_ref,
        search_hint="{search} lists the Piper voices to install with "
        "`speechgate voices pull piper:<voice>`.",
    ),
)
