"""Voice blends, written as Kokoro users write them: "af_bella(2)+af_sky(1)".

Each part has an optional positive weight (default 1); the blend speaks with the weighted mean
of the parts' style vectors. `spell` writes the canonical form that reaches the engine.
"""

from __future__ import annotations

import re

_PART = re.compile(r"\s*([^()+]+?)\s*(?:\(\s*(\d+(?:\.\d*)?|\.\d+)\s*\))?\s*")


def is_blend(voice: str) -> bool:
    return "+" in voice or "(" in voice


def parse(voice: str) -> list[tuple[str, float]]:
    """The parts of `voice` and their weights; raises ValueError on a malformed blend."""
    parts = []
    for text in voice.split("+"):
        match = _PART.fullmatch(text)
        weight = float(match.group(2)) if match and match.group(2) else 1.0
        if match is None or weight <= 0:
            raise ValueError(
                f"malformed voice blend {voice!r}: write voices joined by '+', each with an "
                "optional positive weight in parentheses, e.g. 'af_bella(2)+af_sky(1)'"
            )
        parts.append((match.group(1), weight))
    return parts


def spell(parts: list[tuple[str, float]]) -> str:
    return "+".join(f"{name}({weight:g})" for name, weight in parts)
