"""What `describe` answers: one TTS program per engine, with its installed voices."""

from __future__ import annotations

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from speechgate import __version__
from speechgate.catalog import Catalog
from speechgate.engines import discover

_SPEECHGATE = Attribution(name="speechgate", url="https://github.com/speechgate/speechgate")


def _attribution(engine: str) -> Attribution:
    """The engine's project, as its plugin names it (speechgate's for one that names none)."""
    plugin = discover().get(engine)
    if plugin is None or plugin.url is None:
        return _SPEECHGATE
    return Attribution(name=plugin.display_name, url=plugin.url)


def describe(catalog: Catalog) -> Info:
    programs = []
    for engine in catalog.engines:
        attribution = _attribution(engine)
        voices = [
            TtsVoice(
                name=voice.id,
                attribution=attribution,
                installed=True,
                description=voice.name,
                version=None,
                languages=[voice.language] if voice.language else [],
                # speechgate names every speaker of a multi-speaker model as a voice of its own.
                speakers=None,
            )
            # Every listed voice can speak now: an engine's own voices come with it.
            for voice in catalog.voices(engine)
        ]
        programs.append(
            TtsProgram(
                name=engine,
                attribution=attribution,
                installed=True,
                description=f"{attribution.name} through speechgate",
                version=__version__,
                voices=voices,
                supports_synthesize_streaming=True,
            )
        )
    return Info(tts=programs)
