"""A speechgate engine in a package of its own: a tone per sentence, like speechgate's fake
engine, with its own voices, aliases and options. It proves that an installed package adds an
engine through the `speechgate.engines` entry point alone (see docs/engines.md).

Options: `volume`, the tone's amplitude (0 < volume <= 1, default 0.3).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineConfig, SynthesisRequest, Voice
from speechgate.engines.plugin import EnginePlugin, generic_aliases, openai_aliases
from speechgate.text.segment import segment

SAMPLE_RATE = 22050
SECONDS_PER_CHARACTER = 0.05

# Voice id -> (voice, tone frequency in Hz).
VOICES: dict[str, tuple[Voice, float]] = {
    "alto": (Voice("alto", "Alto tone", "en-US", gender="female"), 392.0),
    "bass": (Voice("bass", "Bass tone", "en-US", gender="male"), 165.0),
    "soprano": (Voice("soprano", "Soprano tone", "fr-FR", gender="female"), 523.0),
}
GENERIC = {"en_us_female": "alto", "en_us_male": "bass", "fr_fr_female": "soprano"}

PLUGIN = EnginePlugin(
    id="tone",
    display_name="Tone",
    description="A tone per sentence, from a separately installed package.",
    factory="speechgate_tone_engine:ToneEngine",
    url="https://example.org/speechgate-tone-engine",
    requires=("speechgate_tone_engine",),
    # A test engine: loaded only where it is named.
    default=False,
    model_aliases=("tone-1",),
    voice_aliases={
        **openai_aliases("alto", "bass"),
        **generic_aliases(GENERIC),
    },
    options={"volume": "the tone's amplitude, above 0 and at most 1 (default 0.3)"},
)


class ToneEngine:
    """A sine per sentence at its voice's pitch; stateless, so thread-safe."""

    def __init__(self, volume: float = 0.3) -> None:
        self._volume = volume

    @classmethod
    def from_config(cls, config: EngineConfig) -> ToneEngine:
        PLUGIN.check_options(config.options)
        volume = float(config.options.get("volume", "0.3"))
        if not 0 < volume <= 1:
            raise ValueError(f"tone option volume must be in (0, 1], not {volume}")
        return cls(volume)

    @property
    def name(self) -> str:
        return PLUGIN.id

    @property
    def sample_rate(self) -> int:
        return SAMPLE_RATE

    @property
    def supports_instructions(self) -> bool:
        return False

    @property
    def supports_seed(self) -> bool:
        return False

    @property
    def blends_voices(self) -> bool:
        return False

    @property
    def phonemes(self) -> bool:
        return False

    def voices(self) -> Sequence[Voice]:
        return [voice for voice, _ in VOICES.values()]

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        if request.voice not in VOICES:
            raise ValueError(f"unknown tone voice {request.voice!r}")
        return self._tones(segment(request.text), VOICES[request.voice][1], request.speed)

    def _tones(self, sentences: list[str], frequency: float, speed: float) -> Iterator[PcmChunk]:
        for sentence in sentences:
            seconds = len(sentence) * SECONDS_PER_CHARACTER / speed
            t = np.arange(max(1, round(seconds * SAMPLE_RATE))) / SAMPLE_RATE
            yield PcmChunk.from_float(self._volume * np.sin(2 * np.pi * frequency * t), SAMPLE_RATE)

    def close(self) -> None:
        pass
