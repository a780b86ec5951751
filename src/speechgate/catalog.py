"""Which models and voices exist, and how client names resolve to them.

Model names resolve to an engine by id or alias ("tts-1"); voice names to one of its voice ids,
directly or by alias ("alloy"), ignoring case and `-` vs `_`. An engine's voices are those its
workers report plus the installed items'; items another process installs or removes are noticed
(a few `stat`s) on the first request that misses and on every listing.

With a language asked for, a generic voice name ("alloy", "de_female") picks a voice of that
language, and a named voice of another language is refused: never a silent wrong language.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from speechgate.engines import blend, discover
from speechgate.engines.base import EngineInfo
from speechgate.errors import (
    InvalidRequest,
    ModelNotFound,
    UnsupportedLanguage,
    VoiceNotFound,
    VoiceNotInstalled,
)
from speechgate.hub.refs import pull_hint, pull_ref, ref_for_known_voice, ref_for_model
from speechgate.settings import Settings, engine_model_aliases
from speechgate.voices import installed
from speechgate.voices.naming import OPENAI_VOICE_GENDERS, language_tag, primary_language, speaks


def normalize(name: str) -> str:
    return name.strip().casefold().replace("-", "_")


@dataclass(frozen=True)
class _Generic:
    """A name for a kind of voice: OpenAI's, "male", "de_female"."""

    language: str | None
    gender: str | None


_GENDERED = re.compile(r"(?:(?P<language>[a-z]{2,3}(?:_[a-z0-9]{2,4})?)_)?(?P<gender>male|female)")


def _generic(key: str) -> _Generic | None:
    if key in OPENAI_VOICE_GENDERS:
        return _Generic(None, OPENAI_VOICE_GENDERS[key])
    match = _GENDERED.fullmatch(key)
    if match is None:
        return None
    language = match["language"]
    return _Generic(language_tag(language) if language else None, match["gender"])


def _not_loaded(model: str, engine: str, loaded: Iterable[str]) -> str:
    ref = ref_for_model(engine)
    engines = ",".join([*loaded, engine])
    extra = discover()[engine].extra
    steps = [f"install its engine (`pip install 'speechgate[{extra}]'`)"] if extra else []
    if ref:
        steps.append(f"pull its model (`speechgate voices pull {ref}`)")
    steps.append(
        f"start the server with it (`speechgate serve --engine {engine}` plus an "
        f"--engine for each other engine, or SPEECHGATE_ENGINES={engines})"
    )
    return (
        f"is speechgate's {engine!r} engine, which this server has not loaded. To enable it: "
        + ", then ".join(steps)
        + "."
    )


def _known_model(name: str) -> str | None:
    """The engine a model name means to speechgate, loaded or not."""
    key = normalize(name)
    for alias, engine in [*((e, e) for e in discover()), *engine_model_aliases().items()]:
        if normalize(alias) == key:
            return engine
    return None


def _model_not_found(name: str, loaded: list[str], valid: list[str]) -> ModelNotFound:
    engine = _known_model(name)
    hint = _not_loaded(name, engine, loaded) if engine and engine not in loaded else None
    return ModelNotFound(name, valid, hint)


def engine_for_model(settings: Settings, model: str) -> str:
    """The engine a model name means, from settings alone."""
    aliases = settings.resolved_model_aliases()
    name = {normalize(alias): engine for alias, engine in aliases.items()}.get(
        normalize(model), normalize(model)
    )
    if name not in settings.engines:
        raise _model_not_found(model, list(settings.engines), [*settings.engines, *aliases])
    return name


@dataclass(frozen=True)
class Model:
    id: str
    engine: EngineInfo


@dataclass(frozen=True)
class VoiceEntry:
    """One voice of an engine, as listed."""

    id: str
    name: str
    language: str | None = None
    quality: str | None = None
    gender: str | None = None
    installed: bool = False


Marks = tuple[tuple[str, int, int], ...]
"""Name, inode and modification time of an engine's directory and each manifest."""


@dataclass(frozen=True)
class _Voices:
    """Every engine's voices at one moment; replaced whole on refresh, never changed."""

    entries: Mapping[str, tuple[VoiceEntry, ...]]
    by_id: Mapping[str, Mapping[str, VoiceEntry]]  # engine -> normalized id -> entry
    marks: Mapping[str, Marks]


def _marks(models: Path | None, engine: str) -> Marks:
    if models is None:
        return ()
    directory = models / engine
    marks: list[tuple[str, int, int]] = []
    try:
        stat = directory.stat()
        marks.append(("", stat.st_ino, stat.st_mtime_ns))
        with os.scandir(directory) as items:
            for item in items:
                if item.name.startswith("."):
                    continue
                with contextlib.suppress(OSError):
                    stat = os.stat(os.path.join(item.path, installed.MANIFEST))
                    marks.append((item.name, stat.st_ino, stat.st_mtime_ns))
    except OSError:  # no such directory (nothing installed yet) or not one
        pass
    return tuple(sorted(marks))


def _merge(info: EngineInfo, items: Iterable[installed.InstalledItem]) -> tuple[VoiceEntry, ...]:
    merged: dict[str, VoiceEntry] = {}
    for voice in info.voices:
        merged[normalize(voice.id)] = VoiceEntry(
            voice.id,
            voice.name,
            language_tag(voice.language) if voice.language else None,
            voice.quality,
            voice.gender,
        )
    for item in items:
        for extra in item.manifest.voices:
            language = language_tag(extra.language) if extra.language else None
            known = merged.get(normalize(extra.id))
            merged[normalize(extra.id)] = (
                replace(
                    known,
                    language=known.language or language,
                    quality=known.quality or extra.quality,
                    gender=known.gender or extra.gender,
                    installed=True,
                )
                if known
                else VoiceEntry(extra.id, extra.id, language, extra.quality, extra.gender, True)
            )
    return tuple(merged.values())


class Catalog:
    """What the loaded engines offer; `refresh` replaces one reference, so reading from any
    thread is safe."""

    def __init__(
        self,
        engines: Mapping[str, EngineInfo],
        model_aliases: Mapping[str, str],
        voice_aliases: Mapping[str, Mapping[str, str]],
        models_dir: Path | None = None,
    ) -> None:
        self.engines = dict(engines)
        self.models = [Model(name, info) for name, info in self.engines.items()] + [
            Model(alias, self.engines[target])
            for alias, target in model_aliases.items()
            if target in self.engines and normalize(alias) not in map(normalize, self.engines)
        ]
        self._models = {normalize(model.id): model for model in self.models}
        self._aliases = {
            name: {normalize(alias): voice for alias, voice in voice_aliases.get(name, {}).items()}
            for name in self.engines
        }
        self._models_dir = models_dir
        self._voices = self._read()

    def refresh(self) -> None:
        self._voices = self._read()

    def notice_installed(self, engine: str | None = None) -> bool:
        """Re-read the installed items if another process changed them; whether it did."""
        marks = self._voices.marks
        engines = [engine] if engine is not None else list(self.engines)
        if all(_marks(self._models_dir, name) == marks[name] for name in engines):
            return False
        self.refresh()
        return True

    def installed_marks(self, engine: str) -> Marks:
        """What changes when `engine`'s installed items do (as last read)."""
        return self._voices.marks.get(engine, ())

    def _read(self) -> _Voices:
        # Marked before reading: a change while the items are read is noticed next time.
        marks = {name: _marks(self._models_dir, name) for name in self.engines}
        entries = {
            name: _merge(
                info, installed.installed(self._models_dir, name) if self._models_dir else ()
            )
            for name, info in self.engines.items()
        }
        return _Voices(
            entries,
            {name: {normalize(e.id): e for e in voices} for name, voices in entries.items()},
            marks,
        )

    def model(self, name: str) -> Model:
        found = self._models.get(normalize(name))
        if found is None:
            raise _model_not_found(name, list(self.engines), [model.id for model in self.models])
        return found

    def voices(self, engine: str) -> tuple[VoiceEntry, ...]:
        self.notice_installed(engine)
        return self._voices.entries[engine]

    def language(self, engine: str, voice: str) -> str | None:
        found = self._voices.by_id[engine].get(normalize(voice))
        return found.language if found is not None else None

    def voice(self, engine: str, name: str, language: str | None = None) -> str:
        """The engine's own id for voice `name` (a canonical blend for a blend); with
        `language`, a voice of another language is refused (UnsupportedLanguage)."""
        try:
            return self._voice(engine, name, language)
        except (VoiceNotFound, VoiceNotInstalled, UnsupportedLanguage):
            if not self.notice_installed(engine):
                raise
        return self._voice(engine, name, language)

    def _voice(self, engine: str, name: str, language: str | None) -> str:
        voices = self._voices
        if self.engines[engine].blends_voices and blend.is_blend(name):
            try:
                parts = blend.parse(name)
            except ValueError as error:
                raise InvalidRequest(str(error), param="voice") from None
            return blend.spell(
                [(self._voice(engine, part, language), weight) for part, weight in parts]
            )
        key = normalize(name)
        wanted = language_tag(language) if language else None
        found = voices.by_id[engine].get(key)
        if found is not None:
            self._check_language(voices, engine, found, name, wanted)
            return found.id
        generic = _generic(key)
        target = self._aliases[engine].get(key)
        if generic is not None and generic.language is not None:
            if wanted and not speaks(generic.language, wanted):
                raise UnsupportedLanguage(
                    f"The voice {name!r} is a {generic.language} voice, but `language` asks "
                    f"for {wanted}.",
                    param="language",
                )
            # The more precise of the two: "de" asked with "de_de_male" means de-DE.
            if wanted is None or "-" not in wanted:
                wanted = generic.language
            if target is None or language:
                return self._pick(voices, engine, wanted, generic.gender, name)
        elif generic is not None and wanted is not None:
            return self._pick(voices, engine, wanted, generic.gender, name)
        if target is None:
            known = ref_for_known_voice(engine, name)
            if known is not None:  # a voice of the model's release, not installed here
                raise VoiceNotInstalled(name, name.strip().lower(), known)
            raise VoiceNotFound(name, self.voice_names(engine))
        entry = voices.by_id[engine].get(normalize(target))
        if entry is None:
            raise VoiceNotInstalled(name, target, pull_ref(engine, target))
        self._check_language(voices, engine, entry, name, wanted)
        return entry.id

    def _generic_alias(self, engine: str, language: str, gender: str | None) -> str | None:
        if gender is None:
            return None
        aliases = self._aliases[engine]
        region = normalize(f"{language}_{gender}")
        return aliases.get(region) or aliases.get(f"{primary_language(language)}_{gender}")

    def _pick(
        self, voices: _Voices, engine: str, language: str, gender: str | None, name: str
    ) -> str:
        """A voice of `language` for a generic name: the alias's, else one of the same gender,
        else any; the exact region first."""
        target = self._generic_alias(engine, language, gender)
        if target is not None:
            entry = voices.by_id[engine].get(normalize(target))
            if entry is not None and speaks(entry.language, language):
                return entry.id
        tag = language_tag(language)
        candidates = sorted(
            (e for e in voices.entries[engine] if speaks(e.language, tag)),
            key=lambda e: (language_tag(e.language or "") != tag, e.gender != gender),
        )
        if candidates:
            return candidates[0].id
        raise self._unsupported(
            voices,
            engine,
            tag,
            f"No installed voice of the model {engine!r} speaks {tag} (asked for with the "
            f"voice {name!r}).",
            target,
        )

    def _check_language(
        self, voices: _Voices, engine: str, entry: VoiceEntry, name: str, wanted: str | None
    ) -> None:
        if wanted is None or entry.language is None or speaks(entry.language, wanted):
            return
        raise self._unsupported(
            voices,
            engine,
            wanted,
            f"The voice {name!r} speaks {entry.language}, not {wanted}.",
            self._generic_alias(engine, wanted, entry.gender),
        )

    def _unsupported(
        self, voices: _Voices, engine: str, language: str, reason: str, target: str | None
    ) -> UnsupportedLanguage:
        """The refusal, naming the installed voices that would do and how to pull one."""
        others = [
            f"{e.id} (model {name!r})" if name != engine else e.id
            for name in [engine, *(n for n in self.engines if n != engine)]
            for e in voices.entries[name]
            if speaks(e.language, language)
        ]
        parts = [reason]
        if others:
            shown = ", ".join(others[:10])
            if len(others) > 10:
                shown += f" and {len(others) - 10} more"
            parts.append(f"Installed voices that speak {language}: {shown}.")
        ref = pull_ref(engine, target) if target else None
        if ref:
            parts.append(f"Install one for this model with `speechgate voices pull {ref}`.")
        else:
            parts.append(pull_hint(engine, language))
        return UnsupportedLanguage(" ".join(parts), param="language")

    def means_a_voice(self, name: str) -> bool:
        """Whether `name` names a voice or a kind of voice to some loaded engine: a name a
        clone may not take, or it would shadow that voice."""
        key = normalize(name)
        if _generic(key) is not None:
            return True
        for engine in self.engines:
            if key in self._aliases[engine]:
                return True
            try:
                self.voice(engine, name)
            except VoiceNotFound:
                continue
            except InvalidRequest:  # not installed, another language, a malformed blend
                return True
            return True
        return False

    def voice_names(self, engine: str) -> list[str]:
        """Every name a client may use with `engine`: voice ids, then installed voices' aliases."""
        voices = self._voices
        ids = [voice.id for voice in voices.entries[engine]]
        return ids + [
            alias
            for alias, target in self._aliases[engine].items()
            if alias not in voices.by_id[engine] and normalize(target) in voices.by_id[engine]
        ]
