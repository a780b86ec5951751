"""From the client's text to what an engine says: SSML, lexicons and normalization.

Provisional: plain text, normalized or not (the full version brings SSML and lexicons).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from speechgate.text.normalize import normalize as normalize_text
from speechgate.text.rewrite import Rewrite

Normalizer = Callable[[str, str], Rewrite]


@dataclass(frozen=True)
class TextOptions:
    """How a request's text is read."""

    normalize: bool = True
    ssml: bool | None = None
    language: str = "en"
    phonemes: bool = False
    engine: str = ""


@dataclass(frozen=True)
class Speech:
    rewrite: Rewrite
    speed: float = 1.0


@dataclass(frozen=True)
class Silence:
    seconds: float


Block = Speech | Silence


def prepare(
    text: str, options: TextOptions, normalize: Normalizer = normalize_text
) -> tuple[Block, ...]:
    rewrite = normalize(text, options.language) if options.normalize else Rewrite.identity(text)
    return (Speech(rewrite),)
