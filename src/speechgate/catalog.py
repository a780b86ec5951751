"""Which models and voices exist, and how client names resolve to them.

Model names resolve to an engine: its own id ("piper") or an alias (OpenAI's "tts-1").
Voice names resolve, per engine, to one of its voice ids directly or through the alias table
(OpenAI's "alloy" -> "en_US-joe-medium"). Matching ignores case and `-` vs `_`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from speechgate.engines import blend
from speechgate.errors import InvalidRequest, ModelNotFound, VoiceNotFound
from speechgate.settings import Settings
from speechgate.workers.messages import EngineInfo


def normalize(name: str) -> str:
    """The form names are compared in: "en-US_Joe" and "en_us-joe" are the same voice."""
    return name.strip().casefold().replace("-", "_")


def engine_for_model(settings: Settings, model: str) -> str:
    """The engine a model name means, from settings alone (without loading any engine)."""
    aliases = settings.resolved_model_aliases()
    name = {normalize(alias): engine for alias, engine in aliases.items()}.get(
        normalize(model), normalize(model)
    )
    if name not in settings.engines:
        raise ModelNotFound(model, [*settings.engines, *aliases])
    return name


@dataclass(frozen=True)
class Model:
    id: str
    engine: EngineInfo


class Catalog:
    """Read-only view of the loaded engines, built once at start-up."""

    def __init__(
        self,
        engines: Mapping[str, EngineInfo],
        model_aliases: Mapping[str, str],
        voice_aliases: Mapping[str, Mapping[str, str]],
    ) -> None:
        self.engines = dict(engines)
        self.models = [Model(name, info) for name, info in self.engines.items()] + [
            Model(alias, self.engines[target])
            for alias, target in model_aliases.items()
            if target in self.engines
        ]
        self._models = {normalize(model.id): model for model in self.models}
        self._voices: dict[str, dict[str, str]] = {}
        for name, info in self.engines.items():
            table = {normalize(voice.id): voice.id for voice in info.voices}
            for alias, target in voice_aliases.get(name, {}).items():
                if normalize(target) in table:
                    table.setdefault(normalize(alias), table[normalize(target)])
            self._voices[name] = table

    def model(self, name: str) -> Model:
        found = self._models.get(normalize(name))
        if found is None:
            raise ModelNotFound(name, [model.id for model in self.models])
        return found

    def voice(self, engine: str, name: str) -> str:
        """The engine's own id for voice `name` (a canonical blend, for a blend of voices)."""
        if self.engines[engine].blends_voices and blend.is_blend(name):
            try:
                parts = blend.parse(name)
            except ValueError as error:
                raise InvalidRequest(str(error), param="voice") from None
            return blend.spell([(self.voice(engine, part), weight) for part, weight in parts])
        found = self._voices[engine].get(normalize(name))
        if found is None:
            raise VoiceNotFound(name, self.voice_names(engine))
        return found

    def voice_names(self, engine: str) -> list[str]:
        """Every name a client may use with `engine`: its voice ids, then its aliases."""
        ids = [voice.id for voice in self.engines[engine].voices]
        known = {normalize(i) for i in ids}
        aliases = [alias for alias in self._voices[engine] if alias not in known]
        return ids + aliases
