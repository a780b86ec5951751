"""A model-free engine for tests and for measuring the gateway alone: it speaks a tone.

It behaves like a real engine where the gateway can tell: a chunk per sentence, a length
proportional to the text and inverse to `speed`, a pitch per voice, phoneme blocks spoken.
Options: `fail_on` (a word that fails the job at its sentence), `chunk_delay` (seconds per
sentence), `model` (a file that must exist for the engine to load).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineConfig, SynthesisRequest, Voice
from speechgate.engines.plugin import EnginePlugin, openai_aliases
from speechgate.text import phonemes
from speechgate.text.segment import segment

SAMPLE_RATE = 16000
# About the pace of speech, so a text lasts as long as a real engine would make it.
SECONDS_PER_CHARACTER = 0.06
_AMPLITUDE = 0.3

# Voice id -> (voice, tone frequency in Hz).
_VOICES: dict[str, tuple[Voice, float]] = {
    "en-high": (Voice("en-high", "English, high tone", "en-US", gender="female"), 440.0),
    "en-low": (Voice("en-low", "English, low tone", "en-US", gender="male"), 220.0),
    "de-mid": (Voice("de-mid", "German, middle tone", "de-DE", gender="female"), 330.0),
}
_OPTIONS = {
    "fail_on": "a word that makes the job fail at the sentence holding it",
    "chunk_delay": "seconds each sentence takes to synthesize",
    "model": "a file that must exist for the engine to load",
}

PLUGIN = EnginePlugin(
    id="fake",
    display_name="speechgate's test tone",
    description="A tone per sentence, no model: for tests and for measuring the gateway alone.",
    factory="speechgate.engines.fake:FakeEngine",
    default=False,
    voice_aliases=openai_aliases("en-high", "en-low"),
    options=_OPTIONS,
)


class FakeEngine:
    """A sine tone per sentence; stateless apart from its options, so thread-safe."""

    def __init__(self, fail_on: str | None = None, chunk_delay: float = 0.0) -> None:
        self._fail_on = fail_on
        self._chunk_delay = chunk_delay

    @classmethod
    def from_config(cls, config: EngineConfig) -> FakeEngine:
        PLUGIN.check_options(config.options)
        model = config.options.get("model")
        if model is not None and not Path(model).is_file():
            raise FileNotFoundError(f"fake model {model} not found")
        delay = float(config.options.get("chunk_delay", "0"))
        return cls(config.options.get("fail_on"), delay)

    @property
    def name(self) -> str:
        return "fake"

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
        return True

    def voices(self) -> Sequence[Voice]:
        return [voice for voice, _ in _VOICES.values()]

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        """One tone per sentence; an unknown voice raises at the call."""
        if request.voice not in _VOICES:
            raise ValueError(f"unknown fake voice {request.voice!r}")
        frequency = _VOICES[request.voice][1]
        return self._tones(segment(request.text), frequency, request.speed)

    def _tones(self, sentences: list[str], frequency: float, speed: float) -> Iterator[PcmChunk]:
        for sentence in sentences:
            if self._fail_on is not None and self._fail_on in sentence:
                raise RuntimeError(f"fake engine told to fail on {self._fail_on!r}")
            if self._chunk_delay:
                time.sleep(self._chunk_delay)
            yield tone(spoken_length(sentence) * SECONDS_PER_CHARACTER / speed, frequency)

    def close(self) -> None:
        pass


def spoken_length(text: str) -> int:
    """How many characters of `text` are "spoken": a phoneme block counts its IPA only."""
    return sum(
        len(run.ipa) if run.ipa is not None else run.end - run.start for run in phonemes.runs(text)
    )


def tone(seconds: float, frequency: float) -> PcmChunk:
    t = np.arange(max(1, round(seconds * SAMPLE_RATE))) / SAMPLE_RATE
    return PcmChunk.from_float(_AMPLITUDE * np.sin(2 * np.pi * frequency * t), SAMPLE_RATE)
