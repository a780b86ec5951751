"""Kokoro-82M through kokoro-onnx (the `kokoro` extra), and the Kokoro model pulled.

The engine is in `engine`, which imports kokoro-onnx and onnxruntime.
"""

from __future__ import annotations

import re

from speechgate.engines.plugin import EnginePlugin, PullRefs, generic_aliases
from speechgate.voices.naming import Gender

INSTALLED_NAME = "kokoro-v1.0"

# A voice id is a language letter, f(emale) or m(ale), then a name ("af_heart").
KOKORO_VOICE = re.compile(r"([abefhijpz])([fm])_[a-z0-9_]+")

KOKORO_LANGUAGES = {
    "a": ("en-US", "en-us"),
    "b": ("en-GB", "en-gb"),
    "e": ("es", "es"),
    "f": ("fr-FR", "fr-fr"),
    "h": ("hi", "hi"),
    "i": ("it", "it"),
    "j": ("ja", "ja"),
    "p": ("pt-BR", "pt-br"),
    "z": ("zh", "cmn"),
}


# Kokoro-82M v1.0's voices: what clients of other Kokoro servers name, present here or not.
KOKORO_V1_VOICES = frozenset(
    {
        *("af_heart", "af_alloy", "af_aoede", "af_bella", "af_jessica", "af_kore", "af_nicole"),
        *("af_nova", "af_river", "af_sarah", "af_sky", "am_adam", "am_echo", "am_eric"),
        *("am_fenrir", "am_liam", "am_michael", "am_onyx", "am_puck", "am_santa"),
        *("bf_alice", "bf_emma", "bf_isabella", "bf_lily", "bm_daniel", "bm_fable", "bm_george"),
        *("bm_lewis", "jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"),
        *("zf_xiaobei", "zf_xiaoni", "zf_xiaoxiao", "zf_xiaoyi", "zm_yunjian", "zm_yunxi"),
        *("zm_yunxia", "zm_yunyang", "ef_dora", "em_alex", "em_santa", "ff_siwis", "hf_alpha"),
        *("hf_beta", "hm_omega", "hm_psi", "if_sara", "im_nicola", "pf_dora", "pm_alex"),
        "pm_santa",
    }
)


def kokoro_language(voice: str) -> str | None:
    """The BCP 47 language a Kokoro voice id spells ("bf_emma" -> "en-GB")."""
    match = KOKORO_VOICE.fullmatch(voice)
    return KOKORO_LANGUAGES[match.group(1)][0] if match else None


def kokoro_phoneme_language(voice: str) -> str | None:
    """The espeak-ng language Kokoro phonemizes a voice's text in ("zf_xiaobei" -> "cmn")."""
    match = KOKORO_VOICE.fullmatch(voice)
    return KOKORO_LANGUAGES[match.group(1)][1] if match else None


def kokoro_gender(voice: str) -> Gender | None:
    match = KOKORO_VOICE.fullmatch(voice)
    return None if match is None else "female" if match.group(2) == "f" else "male"


GENERIC = {
    "en_us_female": "af_heart",
    "en_us_male": "am_adam",
    "en_gb_female": "bf_emma",
    "en_gb_male": "bm_george",
    "es_female": "ef_dora",
    "es_male": "em_alex",
    "fr_fr_female": "ff_siwis",
    "hi_female": "hf_alpha",
    "hi_male": "hm_omega",
    "it_female": "if_sara",
    "it_male": "im_nicola",
    "ja_female": "jf_alpha",
    "ja_male": "jm_kumo",
    "pt_br_female": "pf_dora",
    "pt_br_male": "pm_alex",
    "zh_female": "zf_xiaobei",
    "zh_male": "zm_yunjian",
}
# The embedded model has one male voice: OpenAI's male-sounding names share jm_kumo.
_OPENAI = {
    "alloy": "jf_alpha",
    "ash": "jm_kumo",
    "ballad": "jf_gongitsune",
    "coral": "jf_nezumi",
    "echo": "jm_kumo",
    "fable": "jf_tebukuro",
    "nova": "jf_alpha",
    "onyx": "jm_kumo",
    "sage": "jf_gongitsune",
    "shimmer": "jf_nezumi",
    "verse": "jm_kumo",
    "marin": "jf_tebukuro",
    "cedar": "jm_kumo",
}

PLUGIN = EnginePlugin(
    id="kokoro",
    display_name="Kokoro",
    description="Kokoro-82M (StyleTTS 2 on onnxruntime): natural voices in nine languages.",
    factory="speechgate.engines.kokoro.engine:KokoroEngine",
    url="https://huggingface.co/hexgrad/Kokoro-82M",
    requires=("kokoro_onnx",),
    extra="kokoro",
    rank=20,
    model_aliases=("kokoro-82m",),
    voice_aliases={**_OPENAI, **generic_aliases(GENERIC)},
    options={
        "model": "a local Kokoro .onnx (with `voices`)",
        "voices": "a local Kokoro voices file (with `model`)",
        "lang": "espeak-ng language of voices whose id names none (default en-us)",
        "memory_pattern": "onnxruntime's memory pattern (true/false)",
        "wide_spinning": "onnxruntime's threads spin while waiting (true/false)",
        "cpu_arena": "onnxruntime's CPU arena: shared, session or off",
    },
    pull=PullRefs(
        usage="kokoro",
        item=lambda name: INSTALLED_NAME if name in ("", INSTALLED_NAME) else None,
        for_voice=lambda voice: "kokoro" if KOKORO_VOICE.fullmatch(voice) else None,
        for_known_voice=lambda voice: "kokoro" if voice in KOKORO_V1_VOICES else None,
        model="kokoro",
        bare_item=INSTALLED_NAME,
        search_hint="`speechgate voices pull kokoro` installs every language Kokoro speaks "
        "({search}).",
    ),
)
