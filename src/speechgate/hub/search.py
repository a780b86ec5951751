"""`speechgate voices search`: what can be pulled, and whether it is installed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from speechgate.errors import SpeechgateError
from speechgate.hub.index import Index
from speechgate.voices.installed import installed
from speechgate.voices.naming import matches_filter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SearchResult:
    ref: str
    engine: str
    name: str
    languages: tuple[str, ...]
    quality: str | None
    size_bytes: int | None
    voices: int
    installed: bool


@dataclass(frozen=True)
class Search:
    results: list[SearchResult]
    errors: dict[str, str]
    """Per engine, why its index could not be read (the others are listed regardless)."""


def search(
    index: Index,
    models: Path,
    *,
    language: str | None = None,
    engine: str | None = None,
) -> Search:
    """Every pullable item (of `engine`; with a voice of `language`), by engine then name."""
    present = {(item.manifest.engine, item.manifest.name) for item in installed(models)}
    results: list[SearchResult] = []
    errors: dict[str, str] = {}
    for name, listing in index.engines().items():
        if engine is not None and name != engine:
            continue
        try:
            items = listing()
        except SpeechgateError as error:
            log.warning("cannot read the %s index: %s", name, error.message)
            errors[name] = error.message
            continue
        for item in items:
            if language and not any(matches_filter(tag, language) for tag in item.languages):
                continue
            results.append(
                SearchResult(
                    ref=item.ref,
                    engine=item.engine,
                    name=item.name,
                    languages=item.languages,
                    quality=item.quality,
                    size_bytes=item.size_bytes,
                    voices=len(item.voices),
                    installed=(item.engine, item.name) in present,
                )
            )
    return Search(results, errors)
