"""From the client's text to what engines say: SSML (or ElevenLabs' inline tags), say-as,
sub aliases, the pronunciation lexicon, then the normalizer, in that order.

The result is a row of `Speech` blocks (rewrites of the client's whole text, so word times
point at its characters) and `Silence` blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from importlib import import_module

from speechgate.errors import InvalidRequest
from speechgate.text import ssml
from speechgate.text.lexicon import EMPTY, Lexicon
from speechgate.text.rewrite import Rewrite, RewriteBuilder

PHONEMES_UNSUPPORTED = "phonemes_unsupported"

Normalize = Callable[[str, str], Rewrite]


@dataclass(frozen=True)
class TextOptions:
    """How to prepare one request's text. `ssml` None reads SSML when the text is a document;
    without `phonemes`, IPA in the text or a phoneme rule is refused, naming `engine`."""

    normalize: bool = True
    ssml: bool | None = None
    language: str = "en"
    lexicon: Lexicon = EMPTY
    phonemes: bool = False
    engine: str = "this engine"
    inline_tags: bool = True
    lexicon_param: str | None = None


@dataclass(frozen=True)
class Speech:
    """Say `rewrite.spoken` (made from the client's whole text) at `speed`."""

    rewrite: Rewrite
    speed: float = 1.0


@dataclass(frozen=True)
class Silence:
    seconds: float


Block = Speech | Silence


class Prepared(tuple[Block, ...]):
    """The blocks in order, with the SSML markup ignored, for the response to say."""

    ignored: tuple[str, ...]

    def __new__(cls, blocks: Iterable[Block], ignored: Iterable[str] = ()) -> Prepared:
        prepared = super().__new__(cls, blocks)
        prepared.ignored = tuple(ignored)
        return prepared


def _identity(text: str, language: str = "en") -> Rewrite:
    return Rewrite.identity(text)


def default_normalize() -> Normalize:
    """`speechgate.text.normalize.normalize`, or no change where it is not installed."""
    try:
        module = import_module("speechgate.text.normalize")
    except ImportError:
        return _identity
    normalize: Normalize = module.normalize
    return normalize


def default_say_as() -> ssml.SayAs:
    """`speechgate.text.normalize.say_as`, or the text as written where it is not installed."""
    try:
        module = import_module("speechgate.text.normalize")
    except ImportError:
        return ssml.keep_text
    say_as: ssml.SayAs = module.say_as
    return say_as


def prepare(
    text: str,
    options: TextOptions,
    normalize: Normalize | None = None,
    say_as: ssml.SayAs | None = None,
) -> Prepared:
    """`text` as blocks; raises `InvalidRequest` for invalid SSML or phonemes the engine
    cannot speak."""
    markup = _markup(text, options, say_as)
    if markup is None:
        voiced: list[tuple[Rewrite, float] | Silence] = [(Rewrite.identity(text), 1.0)]
        ignored: tuple[str, ...] = ()
    else:
        voiced = [
            (_rewrite(text, part.pieces), part.speed)
            if isinstance(part, ssml.Voiced)
            else Silence(part.seconds)
            for part in markup.parts
        ]
        ignored = markup.ignored
        _check_markup(markup, options)
    spoken_by = normalize or default_normalize()
    blocks: list[Block] = []
    for item in voiced:
        if isinstance(item, Silence):
            blocks.append(item)
            continue
        rewrite, speed = item
        if options.lexicon:
            by_lexicon = options.lexicon.apply(rewrite.spoken)
            if not options.phonemes and any(
                match.rule.kind == "phoneme" for match in options.lexicon.matches(rewrite.spoken)
            ):
                raise _phonemes_unsupported(
                    options, options.lexicon_param or "input", "a phoneme rule of its lexicon"
                )
            rewrite = rewrite.then(by_lexicon)
        if options.normalize:
            rewrite = rewrite.then(spoken_by(rewrite.spoken, options.language))
        blocks.append(Speech(rewrite, speed))
    return Prepared(blocks, ignored)


def check(text: str, options: TextOptions, say_as: ssml.SayAs | None = None) -> tuple[str, ...]:
    """Raise what `prepare` would, more cheaply, for the gateway to refuse a request before a
    worker prepares it; returns the markup ignored."""
    markup = _markup(text, options, say_as)
    if markup is not None:
        _check_markup(markup, options)
    if not options.phonemes and options.lexicon.has_phonemes:
        # Where the lexicon's rules match depends on the markup's pieces: prepare to know.
        prepare(text, replace(options, normalize=False), say_as=say_as)
    return () if markup is None else markup.ignored


def _check_markup(markup: ssml.Markup, options: TextOptions) -> None:
    if not options.phonemes and any(
        piece.phoneme
        for part in markup.parts
        if isinstance(part, ssml.Voiced)
        for piece in part.pieces
    ):
        raise _phonemes_unsupported(options, "input", "IPA phonemes (<phoneme>)")


def _markup(text: str, options: TextOptions, say_as: ssml.SayAs | None) -> ssml.Markup | None:
    as_ssml = ssml.is_ssml(text) if options.ssml is None else options.ssml
    if as_ssml:
        if not ssml.is_ssml(text):
            raise InvalidRequest(
                "The input was to be read as SSML but is not a <speak> document.",
                param="input",
                code=ssml.INVALID_SSML,
            )
        return ssml.parse_ssml(text, say_as or default_say_as(), options.language)
    if options.inline_tags and ssml.has_inline_tags(text):
        return ssml.parse_inline(text)
    return None


def _rewrite(source: str, pieces: Iterable[ssml.Piece]) -> Rewrite:
    """`source` said as `pieces`, what lies outside them deleted, stripped."""
    builder = RewriteBuilder(source)
    at = 0
    for piece in pieces:
        if piece.start > at:
            builder.replace(at, piece.start, "")
        if piece.spoken is not None:
            builder.replace(piece.start, piece.end, piece.spoken)
        at = piece.end
    if at < len(source):
        builder.replace(at, len(source), "")
    rewrite = builder.build()
    spoken = rewrite.spoken
    lead = len(spoken) - len(spoken.lstrip())
    trail = len(spoken.rstrip())
    if lead == 0 and trail == len(spoken):
        return rewrite
    trimmed = Rewrite.from_replacements(spoken, [(0, lead, ""), (trail, len(spoken), "")])
    return rewrite.then(trimmed)


def _phonemes_unsupported(options: TextOptions, param: str, what: str) -> InvalidRequest:
    return InvalidRequest(
        f"The engine {options.engine!r} cannot speak phonemes, and the request has {what}. "
        "Use an engine that takes them (Piper, Kokoro, espeak-ng) or an alias instead.",
        param=param,
        code=PHONEMES_UNSUPPORTED,
    )
