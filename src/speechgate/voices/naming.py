"""What a voice's name says: language tags, and the facts that Kokoro and pocket-tts voice and
config names carry. One place for the gateway (catalog, hub index) and the engines alike; it
imports nothing heavy.

Languages are BCP 47 tags in their usual case ("en-US", "de-DE", "ja", "zh-Hans"), compared by
their primary subtag, the exact region preferred.
"""

from __future__ import annotations

import re
from typing import Literal

Gender = Literal["female", "male"]


def language_tag(value: str) -> str:
    """`value` as a BCP 47 tag in its usual case: "en_us" -> "en-US", "ZH-hans" -> "zh-Hans"."""
    parts = [part for part in re.split(r"[-_]", value.strip()) if part]
    if not parts:
        return ""
    tag = [parts[0].lower()]
    private = False  # after a singleton ("x-..."), subtags are not regions or scripts
    for part in parts[1:]:
        if private or len(part) == 1:
            private = True
            tag.append(part.lower())
        elif (len(part) == 2 and part.isalpha()) or (len(part) == 3 and part.isdigit()):
            tag.append(part.upper())
        elif len(part) == 4 and part.isalpha():
            tag.append(part.title())
        else:
            tag.append(part.lower())
    return "-".join(tag)


def primary_language(tag: str) -> str:
    return language_tag(tag).split("-", 1)[0]


def speaks(voice_language: str | None, wanted: str) -> bool:
    """A voice of `voice_language` can speak `wanted` (same primary language)."""
    return voice_language is not None and primary_language(voice_language) == primary_language(
        wanted
    )


def matches_filter(voice_language: str | None, wanted: str) -> bool:
    """A `?language=` / `--language` filter: "de" matches de-DE and de-AT; "en-GB" only en-GB
    (and its variants)."""
    if voice_language is None:
        return False
    voice, tag = language_tag(voice_language), language_tag(wanted)
    return voice == tag or voice.startswith(tag + "-")


# --- Kokoro: a voice id is a language letter, f(emale) or m(ale), then a name ("af_heart") ---

KOKORO_VOICE = re.compile(r"([abefhijpz])([fm])_[a-z0-9_]+")

# The letter's language as clients see it, and as espeak-ng phonemizes it for Kokoro.
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


# Kokoro-82M v1.0's voices (VOICES.md of hexgrad/Kokoro-82M): what clients of other Kokoro
# servers name, whether or not this one has them.
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


# --- pocket-tts: configs are named by language ("german", "english_2m_2026-10") -------------

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


# pocket-tts' built-in voices and the language config that has each (pocket-tts' own list).
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
