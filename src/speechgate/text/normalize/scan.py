"""The rule engine the language modules share: rules find spans, each says what to speak.

Rules run in priority order; a span overlapping one an earlier rule took is skipped, so a
telephone number is never read again as a range. Phoneme blocks are taken before any rule.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from speechgate.text.rewrite import Rewrite


@dataclass(frozen=True)
class Context:
    """What rules may depend on besides the text: the BCP 47 tag's language and region."""

    language: str
    region: str

    @property
    def day_first(self) -> bool:
        """Whether "02/12/2026" is the 2nd of December (everywhere but the US and Canada)."""
        if self.language != "en":
            return True
        return self.region not in ("", "US", "CA", "PH")


Say = Callable[[re.Match[str], Context], "str | None"]


@dataclass(frozen=True)
class Rule:
    """Every match of `pattern` is spoken as `say(match, context)`; None lets a later rule try."""

    pattern: re.Pattern[str]
    say: Say


PHONEME_BLOCK = re.compile(r"\[\[.*?\]\]", re.DOTALL)

# Pictographs, dingbats, flags, keycaps, skin tones, joiners and variation selectors. An emoji
# takes the space before it when no word follows, so "Done ✅" leaves "Done" and not "Done ".
_EMOJI_CHARS = (
    "\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\u2300-\u23ff\U0001f1e6-\U0001f1ff"
    "\ufe0f\ufe0e\u200d\u20e3\U000e0020-\U000e007f"
)
EMOJI = Rule(
    re.compile(rf"[ \t]*[{_EMOJI_CHARS}]+(?=[^\w{_EMOJI_CHARS}]|$)|[{_EMOJI_CHARS}]+[ \t]*"),
    lambda match, context: "",
)


def apply(text: str, rules: Sequence[Rule], context: Context) -> Rewrite:
    starts: list[int] = []
    ends: list[int] = []
    spoken: list[str | None] = []
    for block in PHONEME_BLOCK.finditer(text):
        _take(starts, ends, spoken, block.start(), block.end(), None)
    for rule in rules:
        for match in rule.pattern.finditer(text):
            start, end = match.span()
            if start == end or _overlaps(starts, ends, start, end):
                continue
            said = rule.say(match, context)
            if said is not None:
                _take(starts, ends, spoken, start, end, _apart(text, start, end, said))
    replacements = [
        (start, end, said)
        for start, end, said in zip(starts, ends, spoken, strict=True)
        if said is not None
    ]
    return Rewrite.from_replacements(text, replacements)


def _apart(text: str, start: int, end: int, said: str) -> str:
    """`said` with a space where it would run into a letter: "4B" is "four B", not "fourB"."""
    if said[-1:].isalpha() and end < len(text) and text[end].isalpha():
        said += " "
    if said[:1].isalpha() and start > 0 and text[start - 1].isalpha():
        said = " " + said
    return said


def _overlaps(starts: list[int], ends: list[int], start: int, end: int) -> bool:
    index = bisect.bisect_left(starts, end)
    return index > 0 and ends[index - 1] > start


def _take(
    starts: list[int],
    ends: list[int],
    spoken: list[str | None],
    start: int,
    end: int,
    said: str | None,
) -> None:
    index = bisect.bisect_left(starts, start)
    starts.insert(index, start)
    ends.insert(index, end)
    spoken.insert(index, said)


def word_before(text: str, position: int) -> str:
    """The word (letters, digits, periods, apostrophes) that ends just before `position`, past
    spaces; "" where none does."""
    found = _WORD_BEFORE.search(text, max(0, position - 60), position)
    return found.group(1) if found else ""


def word_after(text: str, position: int) -> str:
    found = _WORD_AFTER.match(text, position)
    return found.group(1) if found else ""


def is_sentence_start(text: str, position: int) -> bool:
    """Whether only spaces, opening quotes or brackets stand between `position` and the start
    of the text or the end of a sentence."""
    before = text[:position].rstrip(" \t\"'“‘([")
    return not before or before[-1] in ".!?\n:"


_WORD_BEFORE = re.compile(r"([\w.'’]+)[\s\"'“”‘’(]*$")
_WORD_AFTER = re.compile(r"[\s\"'“”‘’(]*([\w'’]+)")
