"""Pull references ("piper:en_US-lessac-medium", "kokoro", "pocket:german").

Everything here works without the network, so the gateway can name the exact
`speechgate voices pull <ref>` in an error without asking the hub.
"""

from __future__ import annotations

import re

from speechgate.errors import InvalidRequest
from speechgate.voices.naming import KOKORO_V1_VOICES, KOKORO_VOICE, POCKET_VOICE_CONFIGS

PIPER, KOKORO, POCKET = "piper", "kokoro", "pocket"
KOKORO_ITEM = "kokoro-v1.0"
"""The name of the one Kokoro item (`models/kokoro/kokoro-v1.0/`)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


def parse_ref(ref: str) -> tuple[str, str]:
    """`(engine, item name)` of a pull reference; InvalidRequest (param `ref`) if malformed."""
    engine, _, name = ref.strip().partition(":")
    engine = engine.lower()
    if engine == KOKORO and name in ("", KOKORO_ITEM):
        return KOKORO, KOKORO_ITEM
    if engine in (PIPER, POCKET) and _NAME.fullmatch(name):
        return engine, name
    raise InvalidRequest(
        f"{ref!r} is not a pull reference: use piper:<voice key> (e.g. "
        "piper:en_US-lessac-medium), kokoro, or pocket:<config> (e.g. pocket:german).",
        param="ref",
        code="invalid_ref",
    )


def make_ref(engine: str, name: str) -> str:
    return KOKORO if engine == KOKORO else f"{engine}:{name}"


def ref_for_voice(engine: str, voice: str) -> str | None:
    """The reference that would install `voice` of `engine`, if its name says so: Piper voice
    keys ("en_US-lessac-medium", optionally "#speaker"), Kokoro voice ids ("af_heart"),
    pocket-tts' built-in voices ("juergen" -> pocket:german). None when the name alone cannot
    tell."""
    if engine == PIPER:
        key = voice.partition("#")[0]
        if re.fullmatch(r"[a-z]{2,3}_[A-Z]{2}-[A-Za-z0-9_]+-(x_low|low|medium|high)", key):
            return make_ref(PIPER, key)
    if engine == KOKORO and KOKORO_VOICE.fullmatch(voice):
        return KOKORO
    if engine == POCKET and voice in POCKET_VOICE_CONFIGS:
        return make_ref(POCKET, POCKET_VOICE_CONFIGS[voice])
    return None


def ref_for_known_voice(engine: str, voice: str) -> str | None:
    """The reference that installs `voice` if it is one a release of `engine`'s model ships
    (Kokoro v1.0's voices, pocket-tts' built-in ones, in any case): what a client of another
    server names. None for any other name, even one spelled like them."""
    name = voice.strip().lower()
    if engine == KOKORO and name in KOKORO_V1_VOICES:
        return KOKORO
    if engine == POCKET and name in POCKET_VOICE_CONFIGS:
        return make_ref(POCKET, POCKET_VOICE_CONFIGS[name])
    return None


def ref_for_model(model: str) -> str | None:
    """The reference that installs a model clients name: "kokoro", "kokoro-82m" -> kokoro;
    "pocket-tts", "pocket-tts-hd", "pocket-tts-rt" -> pocket:english (its default config)."""
    name = model.lower()
    if name in ("kokoro", "kokoro-82m", "kokoro-82m-v1.0"):
        return KOKORO
    if name in ("pocket", "pocket-tts", "pocket-tts-hd", "pocket-tts-rt"):
        return make_ref(POCKET, "english")
    return None
