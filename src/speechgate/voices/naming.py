"""What a voice's name says: language tags and OpenAI's voice names, for the gateway and the
engines alike (so it imports nothing heavy). Languages are BCP 47 tags compared by their
primary subtag, the exact region preferred."""

from __future__ import annotations

import re
from typing import Literal

Gender = Literal["female", "male"]

OPENAI_VOICES = (
    "alloy",
    "ash",
    "ballad",
    "coral",
    "echo",
    "fable",
    "nova",
    "onyx",
    "sage",
    "shimmer",
    "verse",
    "marin",
    "cedar",
)
# So that a voice picked for them in another language keeps their gender.
OPENAI_VOICE_GENDERS: dict[str, Gender] = {
    "alloy": "female",
    "ash": "male",
    "ballad": "female",
    "coral": "female",
    "echo": "male",
    "fable": "female",
    "nova": "female",
    "onyx": "male",
    "sage": "female",
    "shimmer": "female",
    "verse": "male",
    "marin": "female",
    "cedar": "male",
}


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
