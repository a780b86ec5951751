"""Text normalization: written forms ("$5.20", "Dec. 2nd", "Henry VIII") as a careful speaker
says them, with a map back to the written characters.

English has the full set of rules; German, French and Spanish numbers, money, dates and times;
other languages keep their text (only emoji are dropped). Pure functions, thread-safe.
"""

from __future__ import annotations

from speechgate.text.normalize import english, french, german, spanish
from speechgate.text.normalize import number_words as _number_words
from speechgate.text.normalize.say_as import INTERPRETATIONS, UnknownSayAs, say_as
from speechgate.text.normalize.scan import EMOJI, Context, Rule, apply
from speechgate.text.rewrite import Rewrite

__all__ = [
    "INTERPRETATIONS",
    "LANGUAGES",
    "UnknownSayAs",
    "language_of",
    "normalize",
    "say_as",
    "warm",
    "warm_all",
]

_RULES: dict[str, tuple[Rule, ...]] = {
    "en": english.RULES,
    "de": german.RULES,
    "fr": french.RULES,
    "es": spanish.RULES,
}
_UNSUPPORTED: tuple[Rule, ...] = (EMOJI,)
LANGUAGES = tuple(_RULES)
"""The languages whose numbers, money, dates and times are read as meant."""


def language_of(tag: str) -> Context:
    """A BCP 47 tag as a language and a region."""
    parts = tag.replace("_", "-").split("-")
    region = next((p.upper() for p in parts[1:] if len(p) == 2), "")
    return Context(parts[0].lower(), region)


def normalize(text: str, language: str = "en") -> Rewrite:
    """`text` as it should be spoken in `language` (a BCP 47 tag), mapped back to `text`."""
    context = language_of(language)
    return apply(text, _RULES.get(context.language, _UNSUPPORTED), context)


def warm(language: str = "en") -> None:
    """Load `language`'s number rules now, so the first sentence does not pay for it."""
    code = language_of(language).language
    if code in _RULES:
        _number_words.engine(code)
        normalize("1", language)


def warm_all() -> None:
    """Load every language's number rules now: an engine process may be asked for any."""
    for language in LANGUAGES:
        warm(language)
