"""What `describe` answers: one TTS program per engine, with its installed voices."""

from __future__ import annotations

from wyoming.info import Attribution, Info, TtsProgram, TtsVoice

from speechgate import __version__
from speechgate.catalog import Catalog

_SPEECHGATE = Attribution(name="speechgate", url="https://github.com/speechgate/speechgate")
_ENGINES = {
    "piper": Attribution(name="Piper", url="https://github.com/OHF-Voice/piper1-gpl"),
    "espeak": Attribution(name="eSpeak NG", url="https://github.com/espeak-ng/espeak-ng"),
    "kokoro": Attribution(name="Kokoro", url="https://huggingface.co/hexgrad/Kokoro-82M"),
    "pocket": Attribution(name="Pocket TTS", url="https://github.com/kyutai-labs/pocket-tts"),
}


def describe(catalog: Catalog) -> Info:
    programs = []
    for engine in catalog.engines:
        attribution = _ENGINES.get(engine, _SPEECHGATE)
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
