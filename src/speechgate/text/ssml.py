"""SSML, and ElevenLabs' inline `<break>` and `<phoneme>` tags in plain text: what to say, where
to pause and how fast, each spoken piece pointing at the document's characters so word times
point at the client's text.

expat parses with no DTD: a document type declaration is refused before its entities are read
(no "billion laughs"). A tag is never read aloud: a malformed document is an error naming its
line and column, and markup speechgate does not act on is ignored and reported.
"""

from __future__ import annotations

import re
import xml.parsers.expat
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate

from speechgate.errors import InvalidRequest
from speechgate.text.ipa import InvalidIpa, check_ipa, phoneme_block

# Bounds on what a client can make the parser do.
MAX_SSML_CHARS = 200_000
MAX_DEPTH = 32
MAX_ELEMENTS = 10_000
MAX_BREAK_SECONDS = 10.0  # Amazon Polly's and Azure's maximum too

# Between Amazon Polly's and Azure's; a bare `<break/>` is medium, as in both.
BREAK_STRENGTHS = {
    "none": 0.0,
    "x-weak": 0.1,
    "weak": 0.25,
    "medium": 0.5,
    "strong": 1.0,
    "x-strong": 1.5,
}
# On top of the engine's own pause at a sentence's end.
PARAGRAPH_PAUSE = 0.5
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
SLOWEST, FASTEST = 0.25, 4.0
SAY_AS = (
    "characters",
    "spell-out",
    "cardinal",
    "number",
    "ordinal",
    "digits",
    "date",
    "time",
    "telephone",
    "currency",
)
INVALID_SSML = "invalid_ssml"

_SPEAK = re.compile(r"\s*(?:<\?xml[^>]*\?>\s*)?<speak[\s>/]")
_TIME = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)\s*", re.IGNORECASE)
_RATE_NUMBER = re.compile(r"\s*([+-]?)(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*")

# `say_as(text, interpret_as, format, language)`: what speechgate.text.normalize.say_as does.
SayAs = Callable[[str, str, str | None, str], str]


def is_ssml(text: str) -> bool:
    """Whether `text` is a `<speak>` document."""
    return _SPEAK.match(text) is not None


@dataclass(frozen=True)
class Piece:
    """Source characters `start:end` said as `spoken`, or as they are when `spoken` is None.
    `phoneme`: `spoken` is a phoneme block."""

    start: int
    end: int
    spoken: str | None = None
    phoneme: bool = False


@dataclass(frozen=True)
class Voiced:
    """A stretch of speech: its pieces in source order (what lies between them is not said)."""

    pieces: tuple[Piece, ...]
    speed: float = 1.0


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Markup:
    """A document read for speaking: speech and pauses in order, and the markup ignored."""

    parts: tuple[Voiced | Pause, ...]
    ignored: tuple[str, ...] = ()


def invalid_ssml(document: str, offset: int, reason: str) -> InvalidRequest:
    line = document.count("\n", 0, offset) + 1
    column = offset - (document.rfind("\n", 0, offset) + 1) + 1
    return InvalidRequest(
        f"Invalid SSML at line {line}, column {column}: {reason}",
        param="input",
        code=INVALID_SSML,
    )


def keep_text(text: str, interpret_as: str, format: str | None, language: str) -> str:
    return text


def parse_ssml(document: str, say_as: SayAs = keep_text, language: str = "en") -> Markup:
    """Read a `<speak>` document; raises `InvalidRequest` (`invalid_ssml`) naming line and
    column."""
    if len(document) > MAX_SSML_CHARS:
        raise InvalidRequest(
            f"The SSML document has {len(document)} characters; at most {MAX_SSML_CHARS} are "
            "taken.",
            param="input",
            code=INVALID_SSML,
        )
    return _SsmlReader(document, say_as, language).read()


@dataclass
class _Frame:
    name: str
    start: int  # where its start tag begins
    speed: float
    content_start: int | None = None  # where its content begins (known at the next event)
    captured: list[str] | None = None  # the text of say-as, sub and phoneme
    attributes: dict[str, str] = field(default_factory=dict)


class _Refused(Exception):
    """Raised inside an expat handler to stop the parse; carries the error to raise."""

    def __init__(self, error: InvalidRequest) -> None:
        self.error = error


class _SsmlReader:
    def __init__(self, document: str, say_as: SayAs, language: str) -> None:
        self._document = document
        self._data = document.encode("utf-8")
        # Expat counts bytes; pieces count characters.
        self._char_starts: list[int] | None = (
            None
            if document.isascii()
            else [0, *accumulate(len(c.encode("utf-8")) for c in document)]
        )
        self._say_as = say_as
        self._language = language
        self._parser = xml.parsers.expat.ParserCreate()
        self._stack: list[_Frame] = []
        self._elements = 0
        self._parts: list[Voiced | Pause] = []
        self._pieces: list[Piece] = []
        self._ignored: list[str] = []
        # (start, decoded text) of the chunk whose end the next event gives.
        self._open_chunk: tuple[int, str] | None = None

    def read(self) -> Markup:
        parser = self._parser
        parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.StartDoctypeDeclHandler = self._doctype
        parser.EntityDeclHandler = self._entity
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._characters
        for name in (
            "CommentHandler",
            "ProcessingInstructionHandler",
            "StartCdataSectionHandler",
            "EndCdataSectionHandler",
        ):
            setattr(parser, name, self._other)
        try:
            parser.Parse(self._data, True)
        except _Refused as refused:
            raise refused.error from None
        except xml.parsers.expat.ExpatError as error:
            reason = xml.parsers.expat.ErrorString(error.code)
            raise invalid_ssml(
                self._document, self._offset(parser.ErrorByteIndex), reason
            ) from None
        self._flush()
        return Markup(_settled(self._parts), tuple(dict.fromkeys(self._ignored)))

    # --- positions ------------------------------------------------------------------------

    def _offset(self, byte_index: int) -> int:
        if byte_index < 0:
            return len(self._document)
        if self._char_starts is None:
            return byte_index
        return bisect_right(self._char_starts, byte_index) - 1

    def _here(self) -> int:
        """The current event's offset; closes the text chunk before it."""
        here = self._offset(self._parser.CurrentByteIndex)
        if self._open_chunk is not None:
            start, text = self._open_chunk
            self._open_chunk = None
            self._take_text(start, here, text)
        if self._stack and self._stack[-1].content_start is None:
            self._stack[-1].content_start = here
        return here

    def _refuse(self, offset: int, reason: str) -> _Refused:
        return _Refused(invalid_ssml(self._document, offset, reason))

    # --- handlers -------------------------------------------------------------------------

    def _doctype(self, *_: object) -> None:
        raise self._refuse(self._here(), "a document type declaration (<!DOCTYPE>) is not taken")

    def _entity(self, *_: object) -> None:
        raise self._refuse(self._here(), "entity declarations are not taken")

    def _other(self, *_: object) -> None:
        self._here()

    def _characters(self, text: str) -> None:
        here = self._here()
        self._open_chunk = (here, text)

    def _take_text(self, start: int, end: int, text: str) -> None:
        frame = self._stack[-1] if self._stack else None
        if frame is not None and frame.captured is not None:
            frame.captured.append(text)
        elif frame is not None and frame.name == "desc":
            pass  # a description of audio, never spoken
        else:
            same = self._document[start:end] == text
            self._pieces.append(Piece(start, end, None if same else text))

    def _start(self, tag: str, attributes: dict[str, str]) -> None:
        here = self._here()
        name = tag.rpartition(":")[2]
        self._elements += 1
        if len(self._stack) >= MAX_DEPTH:
            raise self._refuse(here, f"elements nest deeper than {MAX_DEPTH}")
        if self._elements > MAX_ELEMENTS:
            raise self._refuse(here, f"more than {MAX_ELEMENTS} elements")
        parent = self._stack[-1] if self._stack else None
        if parent is None and name != "speak":
            raise self._refuse(here, f"the root element is <{tag}>, not <speak>")
        if parent is not None and parent.captured is not None:
            raise self._refuse(here, f"<{parent.name}> takes text only, not <{tag}>")
        speed = parent.speed if parent else 1.0
        frame = _Frame(name, here, speed, attributes=attributes)
        if name in ("say-as", "sub", "phoneme"):
            self._check_captured(frame)
            frame.captured = []
        elif name == "break":
            self._break(frame)
        elif name in ("s", "p"):
            self._flush()
        elif name == "prosody":
            self._prosody(frame)
        elif name in ("emphasis", "voice", "audio", "lang"):
            self._ignored.append(name)
        elif name not in ("speak", "mark", "desc"):
            self._ignored.append(f"unknown element <{tag}>")
        self._stack.append(frame)

    def _end(self, tag: str) -> None:
        here = self._here()
        frame = self._stack[-1]
        if frame.captured is not None:
            self._finish_captured(frame, here)
        elif frame.name in ("s", "p", "prosody"):
            self._flush()  # at the element's own speed, before it is left
            if frame.name == "p":
                self._parts.append(_ParagraphPause(PARAGRAPH_PAUSE))
        self._stack.pop()

    # --- elements -------------------------------------------------------------------------

    def _check_captured(self, frame: _Frame) -> None:
        attributes = frame.attributes
        if frame.name == "say-as":
            interpret_as = attributes.get("interpret-as", "").strip().lower()
            if not interpret_as:
                raise self._refuse(frame.start, "<say-as> needs an interpret-as attribute")
            if interpret_as not in SAY_AS:
                raise self._refuse(
                    frame.start,
                    f"unknown say-as interpret-as {attributes['interpret-as']!r}; known: "
                    + ", ".join(SAY_AS),
                )
        elif frame.name == "sub":
            if not attributes.get("alias", "").strip():
                raise self._refuse(frame.start, "<sub> needs a non-empty alias attribute")
        else:
            alphabet = attributes.get("alphabet", "ipa").strip().lower()
            if alphabet != "ipa":
                raise self._refuse(
                    frame.start,
                    f"unknown phoneme alphabet {attributes['alphabet']!r}; speechgate takes ipa",
                )
            try:
                check_ipa(attributes.get("ph", ""))
            except InvalidIpa as error:
                raise self._refuse(frame.start, f"<phoneme ph>: {error}") from None

    def _finish_captured(self, frame: _Frame, here: int) -> None:
        assert frame.captured is not None and frame.content_start is not None
        text = "".join(frame.captured).strip()
        attributes = frame.attributes
        phoneme = False
        if frame.name == "say-as":
            interpret_as = attributes["interpret-as"].strip().lower()
            try:
                spoken = self._say_as(text, interpret_as, attributes.get("format"), self._language)
            except ValueError as error:
                raise self._refuse(
                    frame.start, f"<say-as interpret-as={interpret_as!r}>: {error}"
                ) from None
        elif frame.name == "sub":
            spoken = attributes["alias"].strip()
        else:
            spoken = phoneme_block(check_ipa(attributes["ph"]))
            phoneme = True
        start, end = frame.content_start, here
        if not text:  # nothing to point at inside: the element stands for itself
            start, end = frame.start, self._element_end(here)
        self._pieces.append(Piece(start, end, spoken, phoneme))

    def _element_end(self, end_event: int) -> int:
        """Where the element ending at `end_event` ends: after its end tag, if it has one."""
        if self._document.startswith("</", end_event):
            return self._document.index(">", end_event) + 1
        return end_event

    def _break(self, frame: _Frame) -> None:
        attributes = frame.attributes
        if "time" in attributes:
            seconds = parse_break_time(attributes["time"])
            if seconds is None:
                raise self._refuse(
                    frame.start,
                    f"break time {attributes['time']!r} is not a duration such as 1.5s or 500ms",
                )
            if seconds > MAX_BREAK_SECONDS:
                raise self._refuse(
                    frame.start,
                    f"break time {attributes['time']!r} is over {MAX_BREAK_SECONDS:g} s",
                )
        else:
            strength = attributes.get("strength", "medium").strip().lower()
            if strength not in BREAK_STRENGTHS:
                raise self._refuse(
                    frame.start,
                    f"unknown break strength {attributes['strength']!r}; known: "
                    + ", ".join(BREAK_STRENGTHS),
                )
            seconds = BREAK_STRENGTHS[strength]
        if seconds > 0:
            self._flush()
            self._parts.append(Pause(seconds))

    def _prosody(self, frame: _Frame) -> None:
        self._flush()
        for name in frame.attributes:
            if name != "rate":
                self._ignored.append(f"prosody {name}")
        if "rate" in frame.attributes:
            rate = parse_rate(frame.attributes["rate"], frame.speed)
            if rate is None:
                raise self._refuse(
                    frame.start,
                    f"prosody rate {frame.attributes['rate']!r} is not one of "
                    f"{', '.join(RATES)}, a percentage or a multiplier between {SLOWEST:g} and "
                    f"{FASTEST:g}",
                )
            frame.speed = rate

    def _flush(self) -> None:
        pieces, self._pieces = self._pieces, []
        if any(_says_something(self._document, piece) for piece in pieces):
            speed = self._stack[-1].speed if self._stack else 1.0
            self._parts.append(Voiced(tuple(pieces), speed))


class _ParagraphPause(Pause):
    """A pause that only separates: none before the first speech or after the last."""


def _says_something(document: str, piece: Piece) -> bool:
    text = document[piece.start : piece.end] if piece.spoken is None else piece.spoken
    return bool(text.strip())


def _settled(parts: list[Voiced | Pause]) -> tuple[Voiced | Pause, ...]:
    """`parts` without paragraph pauses that separate nothing."""
    voiced = [i for i, part in enumerate(parts) if isinstance(part, Voiced)]
    settled: list[Voiced | Pause] = []
    for index, part in enumerate(parts):
        if isinstance(part, _ParagraphPause):
            if voiced and voiced[0] < index < voiced[-1]:
                settled.append(Pause(part.seconds))
        else:
            settled.append(part)
    return tuple(settled)


def parse_break_time(value: str) -> float | None:
    """Seconds in "1.5s" or "500ms"; None for anything else."""
    match = _TIME.fullmatch(value)
    if match is None:
        return None
    number = float(match.group(1))
    return number / 1000 if match.group(2).lower() == "ms" else number


def parse_rate(value: str, enclosing: float = 1.0) -> float | None:
    """A `<prosody rate>` ("slow", "80%", "1.2", "+10%") as a speed multiplier; None when it is
    none of these or beyond the bounds."""
    text = value.strip().lower()
    if text in RATES:
        return RATES[text]
    match = _RATE_NUMBER.fullmatch(text)
    if match is None:
        return None
    sign, number, percent = match.groups()
    amount = float(number) / 100 if percent else float(number)
    if sign:
        if not percent:
            return None
        rate = enclosing * (1 + amount if sign == "+" else 1 - amount)
    else:
        rate = amount
    return rate if SLOWEST <= rate <= FASTEST else None


# --- ElevenLabs' inline tags --------------------------------------------------------------

_INLINE = re.compile(
    r"<break\b(?P<break>[^<>]*?)/?>"
    r"|<phoneme\b(?P<phoneme>[^<>]*)>(?P<word>[^<>]*)</phoneme\s*>",
    re.IGNORECASE,
)
_ATTRIBUTE = re.compile(r"""([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')""")


def has_inline_tags(text: str) -> bool:
    return _INLINE.search(text) is not None


def parse_inline(text: str) -> Markup:
    """Plain text with ElevenLabs' `<break>` and `<phoneme>` tags, the rest spoken as it is."""
    parts: list[Voiced | Pause] = []
    pieces: list[Piece] = []
    at = 0

    def flush() -> None:
        nonlocal pieces
        if any(_says_something(text, piece) for piece in pieces):
            parts.append(Voiced(tuple(pieces)))
        pieces = []

    for tag in _INLINE.finditer(text):
        if tag.start() > at:
            pieces.append(Piece(at, tag.start()))
        at = tag.end()
        attributes = {
            m.group(1).lower(): m.group(2) or m.group(3) or ""
            for m in _ATTRIBUTE.finditer(tag.group("break") or tag.group("phoneme") or "")
        }
        if tag.group("break") is not None:
            seconds = _inline_break(text, tag.start(), attributes)
            if seconds > 0:
                flush()
                parts.append(Pause(seconds))
            continue
        alphabet = attributes.get("alphabet", "ipa").strip().lower()
        if alphabet != "ipa":
            raise invalid_ssml(
                text, tag.start(), f"unknown phoneme alphabet {alphabet!r}; speechgate takes ipa"
            )
        try:
            ipa = check_ipa(attributes.get("ph", ""))
        except InvalidIpa as error:
            raise invalid_ssml(text, tag.start(), f"<phoneme ph>: {error}") from None
        word_start, word_end = tag.span("word")
        if not text[word_start:word_end].strip():
            word_start, word_end = tag.span()
        pieces.append(Piece(word_start, word_end, phoneme_block(ipa), True))
    if at < len(text):
        pieces.append(Piece(at, len(text)))
    flush()
    return Markup(tuple(parts))


def _inline_break(text: str, offset: int, attributes: dict[str, str]) -> float:
    if "time" in attributes:
        seconds = parse_break_time(attributes["time"])
        if seconds is None or seconds > MAX_BREAK_SECONDS:
            raise invalid_ssml(
                text,
                offset,
                f"break time {attributes['time']!r} is not a duration such as 1.5s or 500ms "
                f"of at most {MAX_BREAK_SECONDS:g} s",
            )
        return seconds
    strength = attributes.get("strength", "medium").strip().lower()
    if strength not in BREAK_STRENGTHS:
        raise invalid_ssml(text, offset, f"unknown break strength {strength!r}")
    return BREAK_STRENGTHS[strength]
