"""Captions from word times: SRT and WebVTT files of short cues.

A cue is a few words of the text as written, shown from its first word's start to its last
word's end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from speechgate.text.segment import clean_text
from speechgate.timing import WordTime

# A cue of more words than this is hard to read in the time it is shown.
MAX_CUE_WORDS = 7
_SENTENCE_END = re.compile("[.!?\u2026\u3002\uff01\uff1f]")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    text: str


def cues(text: str, words: Sequence[WordTime], max_words: int = MAX_CUE_WORDS) -> list[Cue]:
    """`words` of `text` grouped into cues, each ending at a sentence end or `max_words`."""
    found: list[Cue] = []
    group: list[WordTime] = []
    for index, word in enumerate(words):
        group.append(word)
        token_end = _token_end(text, word.end_char)
        if (
            len(group) == max_words
            or index == len(words) - 1
            or _SENTENCE_END.search(text, word.end_char, token_end)
        ):
            first = _token_start(text, group[0].start_char)
            shown = _SPACE.sub(" ", clean_text(text[first:token_end])).strip()
            found.append(Cue(group[0].start_s, group[-1].end_s, shown))
            group = []
    return found


def _token_start(text: str, position: int) -> int:
    """Back to the start of the whitespace-separated token around `position`: a word's
    opening quote or bracket belongs on screen with it."""
    while position > 0 and not text[position - 1].isspace():
        position -= 1
    return position


def _token_end(text: str, position: int) -> int:
    while position < len(text) and not text[position].isspace():
        position += 1
    return position


def srt(found: Sequence[Cue]) -> str:
    blocks = [
        f"{number}\n{_time(cue.start, ',')} --> {_time(cue.end, ',')}\n{_arrowless(cue.text)}\n"
        for number, cue in enumerate(found, 1)
    ]
    return "\n".join(blocks)


def webvtt(found: Sequence[Cue]) -> str:
    blocks = [
        f"{_time(cue.start, '.')} --> {_time(cue.end, '.')}\n{_vtt_text(cue.text)}\n"
        for cue in found
    ]
    return "\n".join(["WEBVTT\n", *blocks])


CAPTION_FORMATS = {".srt": srt, ".vtt": webvtt}


def write_captions(path: Path, text: str, words: Sequence[WordTime]) -> int:
    """Write the captions of `words` to `path`, SRT or WebVTT by its suffix; returns the
    number of cues."""
    write = CAPTION_FORMATS.get(path.suffix.lower())
    if write is None:
        raise ValueError(f"captions are .srt or .vtt files, not {path.name!r}")
    found = cues(text, words)
    path.write_text(write(found), encoding="utf-8")
    return len(found)


def _time(seconds: float, separator: str) -> str:
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    whole, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{whole:02d}{separator}{millis:03d}"


def _arrowless(text: str) -> str:
    # "-->" in a cue's text would read as a timing line.
    return text.replace("-->", "->")


def _vtt_text(text: str) -> str:
    # WebVTT cue text is markup: "&" and "<" start entities and tags.
    return _arrowless(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
