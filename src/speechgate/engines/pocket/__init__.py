"""Kyutai's pocket-tts on torch (the `pocket` extra), and every pocket-tts config pulled.

The engine is in `engine`, which imports torch and pocket-tts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from speechgate.engines.plugin import EnginePlugin, PullRefs, generic_aliases
from speechgate.voices.naming import Gender

_POCKET_CONFIG_LANGUAGES = {
    "english": "en",
    "french": "fr",
    "german": "de",
    "italian": "it",
    "portuguese": "pt",
    "spanish": "es",
    "dutch": "nl",
}


def pocket_config_language(config: str | None) -> str | None:
    """A packaged config's language ("german" -> "de", "english_2m_2026-10" -> "en")."""
    return _POCKET_CONFIG_LANGUAGES.get(config.split("_")[0]) if config else None


# pocket-tts' built-in voices and the config that has each.
POCKET_VOICE_CONFIGS = {
    **dict.fromkeys(
        (
            "alba",
            "anna",
            "azelma",
            "bill_boerst",
            "caro_davy",
            "charles",
            "cosette",
            "eponine",
            "eve",
            "fantine",
            "george",
            "jane",
            "javert",
            "jean",
            "marius",
            "mary",
            "michael",
            "paul",
            "peter_yearsley",
            "stuart_bell",
            "vera",
        ),
        "english",
    ),
    "giovanni": "italian",
    "lola": "spanish",
    "juergen": "german",
    "rafael": "portuguese",
    "daan": "dutch",
    "estelle": "french",
}


# The built-in pocket voices whose source says who speaks (VCTK's speaker table, the donors').
POCKET_GENDERS: dict[str, Gender] = {
    "alba": "female",
    "marius": "male",
    "javert": "male",
    "jean": "male",
    "fantine": "female",
    "cosette": "female",
    "eponine": "female",
    "azelma": "female",
    "anna": "female",
    "vera": "female",
    "charles": "male",
    "paul": "male",
    "george": "male",
    "mary": "female",
    "jane": "female",
    "michael": "male",
    "eve": "female",
    "peter_yearsley": "male",
    "stuart_bell": "male",
    "caro_davy": "female",
    "giovanni": "male",
    "lola": "female",
    "juergen": "male",
    "rafael": "male",
    "daan": "male",
    "estelle": "female",
}


GENERIC = {"en_us_female": "alba", "en_us_male": "marius"}
# OpenAI's male-sounding names take male speakers.
_OPENAI = {
    "alloy": "alba",
    "ash": "marius",
    "ballad": "cosette",
    "coral": "fantine",
    "echo": "jean",
    "fable": "eponine",
    "nova": "azelma",
    "onyx": "javert",
    "sage": "anna",
    "shimmer": "vera",
    "verse": "charles",
    "marin": "mary",
    "cedar": "george",
}
_ITEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


def _builtin_voice_ref(voice: str) -> str | None:
    """A built-in voice comes with the config that has it ("juergen" -> pocket:german)."""
    config = POCKET_VOICE_CONFIGS.get(voice)
    return f"pocket:{config}" if config is not None else None


def _has_a_model(models_dir: Path, options: Mapping[str, str] | None) -> bool:
    """Whether a model was pulled or configured: pocket-tts ships no weights."""
    from speechgate.voices.installed import installed

    return options is not None or any(installed(models_dir, "pocket"))


PLUGIN = EnginePlugin(
    id="pocket",
    display_name="Pocket TTS",
    description="Kyutai's pocket-tts (a flow language model on torch): voice cloning, streaming.",
    factory="speechgate.engines.pocket.engine:PocketEngine",
    url="https://github.com/kyutai-labs/pocket-tts",
    requires=("pocket_tts",),
    extra="pocket",
    rank=30,
    model_aliases=("pocket-tts", "pocket-tts-hd", "pocket-tts-rt"),
    voice_aliases={**_OPENAI, **generic_aliases(GENERIC)},
    options={
        "language": "a config packaged with pocket-tts (default english)",
        "config": "a local YAML config in pocket-tts' schema (not with `language`)",
        "quantize": "dynamic int8 on the language model (true/false)",
        "eos_threshold": "when speech ends (default: the config's)",
    },
    ready=_has_a_model,
    pull=PullRefs(
        usage="pocket:<config> (e.g. pocket:german)",
        item=lambda name: name if _ITEM.fullmatch(name) else None,
        for_voice=_builtin_voice_ref,
        for_known_voice=_builtin_voice_ref,
        # Alias tables' voices are English, which the default config brings.
        model="pocket:english",
        voices_come_with_model=True,
        search_hint="{search} lists pocket-tts' languages, installed with "
        "`speechgate voices pull pocket:<config>`.",
    ),
)
