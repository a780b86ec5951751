"""The pronunciation lexicon a request is read with: the operator's (`Settings.text.lexicon_path`),
under the pronunciation dictionaries the request names, which must be its own key's.

As on ElevenLabs, a request is read with the dictionaries it names, not every one its key made;
of two rules for one word the later wins (last-named dictionary first, the operator's last).
The operator's phoneme rules are left out for an engine without phonemes, as a client cannot
change them; a named dictionary's are the client's to fix, and refused.
"""

from __future__ import annotations

import asyncio
import pickle
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from speechgate.errors import InvalidRequest, NotFound
from speechgate.speech_request import DictionaryLocator
from speechgate.text.lexicon import EMPTY, InvalidLexicon, Lexicon, load_lexicon
from speechgate.workers.interface import StartupError

MAX_LOCATORS = 3
"""Dictionaries one request may name, as on ElevenLabs."""
LOCATORS_PARAM = "pronunciation_dictionary_locators"
CACHE_SECONDS = 60.0
"""How long a dictionary deleted by another process may still apply."""
_FOUND_ENTRIES = 1024
_COMBINED_ENTRIES = 64


class StoredRules(Protocol):
    @property
    def version_id(self) -> str: ...

    @property
    def rules(self) -> list[dict[str, Any]]: ...


Find = Callable[[str, str | None], StoredRules | None]
"""The dictionary with an id if the key owns it, else None; blocks, so it runs in a thread."""


def operator_lexicon(path: Path | None) -> Lexicon:
    """The operator's lexicon file, read at start-up; raises StartupError."""
    if path is None:
        return EMPTY
    try:
        return load_lexicon(path)
    except (InvalidLexicon, OSError) as error:
        raise StartupError(f"lexicon_path: {error}") from None


@dataclass(frozen=True)
class Named:
    """The dictionaries a request named, found for its key, in the request's order."""

    versions: tuple[str, ...] = ()
    lexicons: tuple[Lexicon, ...] = ()


NAMED_NONE = Named()


class Dictionaries:
    """Finds the dictionaries requests name and combines them with the operator's lexicon,
    caching both: a version's rules never change, only whether it is still there can go stale.
    Event loop only."""

    def __init__(
        self,
        operator: Lexicon = EMPTY,
        find: Find | None = None,
        ttl: float = CACHE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.operator = operator
        self._by_engine = {
            True: operator,
            False: Lexicon(rule for rule in operator.rules if rule.kind == "alias"),
        }
        for lexicon in self._by_engine.values():
            # Pickled once now, not on the first request that carries it.
            pickle.dumps(lexicon)
        self._find = find
        self._ttl = ttl
        self._clock = clock
        # (owner, id) -> (until, version, lexicon); kept past `until` for the same version.
        self._found: OrderedDict[tuple[str | None, str], tuple[float, str, Lexicon]] = OrderedDict()
        self._combined: OrderedDict[tuple[bool, tuple[str, ...]], Lexicon] = OrderedDict()

    async def named(self, locators: Sequence[DictionaryLocator], owner: str | None) -> Named:
        """The dictionaries `locators` name, if `owner` owns them: NotFound for one that is
        unknown or another key's, InvalidRequest for a version it does not have."""
        if not locators:
            return NAMED_NONE
        if len(locators) > MAX_LOCATORS:
            raise InvalidRequest(
                f"A request may name at most {MAX_LOCATORS} pronunciation dictionaries, "
                f"not {len(locators)}.",
                param=LOCATORS_PARAM,
            )
        versions: list[str] = []
        lexicons: list[Lexicon] = []
        for locator in locators:
            version, lexicon = await self._one(locator.dictionary_id, owner)
            if locator.version_id is not None and locator.version_id != version:
                raise InvalidRequest(
                    f"The pronunciation dictionary {locator.dictionary_id!r} has no version "
                    f"{locator.version_id!r}; its version is {version!r}.",
                    param=LOCATORS_PARAM,
                    code="pronunciation_dictionary_version_not_found",
                )
            versions.append(version)
            lexicons.append(lexicon)
        return Named(tuple(versions), tuple(lexicons))

    async def _one(self, dictionary_id: str, owner: str | None) -> tuple[str, Lexicon]:
        key = (owner, dictionary_id)
        cached = self._found.get(key)
        now = self._clock()
        if cached is not None and cached[0] > now:
            return cached[1], cached[2]
        found = (
            None
            if self._find is None
            else await asyncio.to_thread(self._find, dictionary_id, owner)
        )
        if found is None:
            self._found.pop(key, None)
            raise NotFound(
                f"No pronunciation dictionary {dictionary_id!r} belongs to this key.",
                param=LOCATORS_PARAM,
                code="pronunciation_dictionary_not_found",
            )
        if cached is not None and cached[1] == found.version_id:
            lexicon = cached[2]
        else:
            try:
                lexicon = Lexicon.from_dicts(found.rules)
            except InvalidLexicon as error:  # stored by a release that checked rules less
                raise InvalidRequest(
                    f"The pronunciation dictionary {dictionary_id!r} cannot be used: {error}",
                    param=LOCATORS_PARAM,
                    code="invalid_rules",
                ) from None
        self._found[key] = (now + self._ttl, found.version_id, lexicon)
        self._found.move_to_end(key)
        while len(self._found) > _FOUND_ENTRIES:
            self._found.popitem(last=False)
        return found.version_id, lexicon

    def lexicon(self, named: Named, phonemes: bool) -> Lexicon:
        """The operator's lexicon with the named dictionaries over it."""
        base = self._by_engine[phonemes]
        if not named.lexicons:
            return base
        key = (phonemes, named.versions)
        combined = self._combined.get(key)
        if combined is None:
            combined = Lexicon.combine(base, *named.lexicons)
            self._combined[key] = combined
            while len(self._combined) > _COMBINED_ENTRIES:
                self._combined.popitem(last=False)
        else:
            self._combined.move_to_end(key)
        return combined

    def forget(self, dictionary_id: str) -> None:
        """Stop using a dictionary deleted through this server."""
        for key in [key for key in self._found if key[1] == dictionary_id]:
            del self._found[key]
