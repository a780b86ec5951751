"""espeak-ng: formant synthesis in about a hundred languages, from speechgate's own dependencies.

The engine is in `engine`, which loads libespeak-ng.
"""

from __future__ import annotations

from speechgate.engines.plugin import EnginePlugin, generic_aliases
from speechgate.voices.naming import OPENAI_VOICES

GENERIC = {"en_us_female": "en-us+f3", "en_us_male": "en-us+m3"}
# Distinct variants, so that clients switching OpenAI voices hear a difference.
_VARIANTS = ("f3", "m3", "m1", "f2", "m2", "m4", "f4", "m7", "m5", "f1", "m6", "f5", "f3")

PLUGIN = EnginePlugin(
    id="espeak",
    display_name="eSpeak NG",
    description="espeak-ng (formant synthesis): small, fast, robotic, about a hundred languages.",
    factory="speechgate.engines.espeak.engine:EspeakEngine",
    url="https://github.com/espeak-ng/espeak-ng",
    requires=("espeakng_loader",),
    rank=10,
    voice_aliases={
        **{
            voice: f"en-us+{variant}"
            for voice, variant in zip(OPENAI_VOICES, _VARIANTS, strict=True)
        },
        **generic_aliases(GENERIC),
    },
    options={},
)
