"""Pronunciation lexicons: words said another way (an alias, "nginx" -> "engine x") or as IPA
phonemes ("Kubernetes" -> [[ ˌkuːbɚˈnɛtiːz ]]).

Rules have ElevenLabs' shape and load from JSON, YAML or W3C PLS. A lexicon is applied in one
pass, longest match first, each match replaced once, so a lexicon whose aliases lead back to
where they started (A -> B, B -> A) cannot mean what its author thought, and is refused.
"""

from __future__ import annotations

# ruff: noqa: RUF002 - IPA in docstrings
import hashlib
import json
import pickle
import re
import xml.parsers.expat
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from speechgate.text.ipa import InvalidIpa, check_ipa, phoneme_block
from speechgate.text.rewrite import Rewrite, RewriteBuilder

# Bounds on one lexicon (the operator's file, one key's or a request's dictionary).
MAX_RULES = 5_000
MAX_BYTES = 1_000_000
MAX_GRAPHEME_CHARS = 200
MAX_REPLACEMENT_CHARS = 1_000

RuleKind = Literal["alias", "phoneme"]
_PHONEME_BLOCK = re.compile(r"\[\[.*?\]\]", re.DOTALL)


class InvalidLexicon(ValueError):
    """A lexicon that cannot be used; the message names the rule (by its index and grapheme)."""


@dataclass(frozen=True)
class Rule:
    """Say `replacement` for `grapheme`: an alias, or checked IPA."""

    grapheme: str
    kind: RuleKind
    replacement: str
    case_sensitive: bool = True
    word_boundaries: bool = True

    @property
    def spoken(self) -> str:
        return phoneme_block(self.replacement) if self.kind == "phoneme" else self.replacement

    def to_dict(self) -> dict[str, Any]:
        shape: dict[str, Any] = {"string_to_replace": self.grapheme, "type": self.kind}
        if self.kind == "alias":
            shape["alias"] = self.replacement
        else:
            shape["phoneme"] = self.replacement
            shape["alphabet"] = "ipa"
        shape["case_sensitive"] = self.case_sensitive
        shape["word_boundaries"] = self.word_boundaries
        return shape


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    rule: Rule


def rule_from_dict(shape: object, index: int = 0) -> Rule:
    """One rule in ElevenLabs' shape; raises `InvalidLexicon` naming it."""
    if not isinstance(shape, Mapping):
        raise InvalidLexicon(f"rule {index} is not an object")
    grapheme = shape.get("string_to_replace")
    label = f"rule {index} ({grapheme!r})" if isinstance(grapheme, str) else f"rule {index}"
    if not isinstance(grapheme, str) or not grapheme.strip():
        raise InvalidLexicon(f"{label}: string_to_replace must be a non-empty string")
    if len(grapheme) > MAX_GRAPHEME_CHARS:
        raise InvalidLexicon(f"{label}: string_to_replace is over {MAX_GRAPHEME_CHARS} characters")
    kind = shape.get("type")
    if kind not in ("alias", "phoneme"):
        raise InvalidLexicon(f"{label}: type must be 'alias' or 'phoneme', not {kind!r}")
    flags = {}
    for name in ("case_sensitive", "word_boundaries"):
        value = shape.get(name, True)
        if not isinstance(value, bool):
            raise InvalidLexicon(f"{label}: {name} must be true or false")
        flags[name] = value
    value = shape.get(kind)
    if not isinstance(value, str) or not value.strip():
        raise InvalidLexicon(f"{label}: {kind} must be a non-empty string")
    if len(value) > MAX_REPLACEMENT_CHARS:
        raise InvalidLexicon(f"{label}: {kind} is over {MAX_REPLACEMENT_CHARS} characters")
    if kind == "phoneme":
        alphabet = shape.get("alphabet", "ipa")
        if not isinstance(alphabet, str) or alphabet.strip().lower() != "ipa":
            raise InvalidLexicon(f"{label}: alphabet {alphabet!r} is not taken; use ipa")
        try:
            value = check_ipa(value)
        except InvalidIpa as error:
            raise InvalidLexicon(f"{label}: invalid IPA: {error}") from None
    elif "[[" in value or "]]" in value:
        raise InvalidLexicon(f"{label}: an alias cannot contain [[ or ]]")
    return Rule(grapheme, kind, value.strip() if kind == "alias" else value, **flags)


class Lexicon:
    """Rules applied together, the later of two for one grapheme winning. Immutable.

    It goes to the worker with every request: pickled once per lexicon and rebuilt once per
    worker process, so a large operator's lexicon costs a request neither."""

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        chosen: dict[str, Rule] = {}
        for rule in rules:
            chosen.pop(rule.grapheme, None)  # a later rule moves to the end of the order
            chosen[rule.grapheme] = rule
        self.rules: tuple[Rule, ...] = tuple(chosen.values())
        self.has_phonemes = any(rule.kind == "phoneme" for rule in self.rules)
        self._hash: int | None = None
        self._wire: tuple[bytes, bytes] | None = None  # (digest, pickled rules)
        # Lower-cased graphemes for rules that ignore case.
        self._exact: dict[str, Rule] = {}
        self._folded: dict[str, Rule] = {}
        for rule in self.rules:
            if rule.case_sensitive:
                self._exact[rule.grapheme] = rule
            else:
                self._folded[rule.grapheme.lower()] = rule
        self._lengths = sorted({len(rule.grapheme) for rule in self.rules}, reverse=True)
        self._firsts = {rule.grapheme[0] for rule in self.rules} | {
            rule.grapheme[0].lower() for rule in self.rules if not rule.case_sensitive
        }

    def __len__(self) -> int:
        return len(self.rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lexicon) and other.rules == self.rules

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self.rules)
        return self._hash

    def __reduce__(self) -> tuple[Any, tuple[bytes, bytes]]:
        if self._wire is None:
            rules = pickle.dumps(self.rules, pickle.HIGHEST_PROTOCOL)
            self._wire = (hashlib.blake2b(rules, digest_size=16).digest(), rules)
        return _received, self._wire

    def __repr__(self) -> str:
        return f"Lexicon({len(self.rules)} rules)"

    @classmethod
    def combine(cls, *lexicons: Lexicon | None) -> Lexicon:
        return cls(rule for lexicon in lexicons if lexicon for rule in lexicon.rules)

    @classmethod
    def from_dicts(cls, shapes: object) -> Lexicon:
        """A validated lexicon from rules in ElevenLabs' shape; raises `InvalidLexicon`."""
        if not isinstance(shapes, Sequence) or isinstance(shapes, (str, bytes)):
            raise InvalidLexicon("the rules must be a list")
        if len(shapes) > MAX_RULES:
            raise InvalidLexicon(f"{len(shapes)} rules; a lexicon has at most {MAX_RULES}")
        lexicon = cls(rule_from_dict(shape, index) for index, shape in enumerate(shapes))
        lexicon.check_loops()
        return lexicon

    def to_dicts(self) -> list[dict[str, Any]]:
        return [rule.to_dict() for rule in self.rules]

    def matches(self, text: str) -> Iterator[Match]:
        """Where rules apply in `text`: longest first, none overlapping, none in a block."""
        if not self.rules:
            return
        protected = [block.span() for block in _PHONEME_BLOCK.finditer(text)]
        position, end = 0, len(text)
        while position < end:
            if protected and protected[0][0] <= position:
                position = max(position, protected.pop(0)[1])
                continue
            character = text[position]
            if character in self._firsts or character.lower() in self._firsts:
                found = self._match_at(text, position)
                if found is not None:
                    yield found
                    position = found.end
                    continue
            position += 1

    def _match_at(self, text: str, position: int) -> Match | None:
        limit = len(text) - position
        boundary_before = position == 0 or not _is_word(text[position - 1])
        for length in self._lengths:
            if length > limit:
                continue
            piece = text[position : position + length]
            rule = self._exact.get(piece) or self._folded.get(piece.lower())
            if rule is None:
                continue
            if rule.word_boundaries and not (
                (boundary_before or not _is_word(piece[0]))
                and (
                    position + length == len(text)
                    or not _is_word(text[position + length])
                    or not _is_word(piece[-1])
                )
            ):
                continue
            return Match(position, position + length, rule)
        return None

    def apply(self, text: str) -> Rewrite:
        builder = RewriteBuilder(text)
        for match in self.matches(text):
            builder.replace(match.start, match.end, match.rule.spoken)
        return builder.build()

    def check_loops(self) -> None:
        """Raise `InvalidLexicon` if aliases lead back to a grapheme they came from (an alias
        containing its own grapheme, "Dr" -> "Dr.", is fine)."""
        leads: dict[Rule, list[Rule]] = {
            rule: [match.rule for match in self.matches(rule.replacement) if match.rule is not rule]
            for rule in self.rules
            if rule.kind == "alias"
        }
        done: set[Rule] = set()
        for first in leads:
            if first in done:
                continue
            path: list[Rule] = []
            on_path: set[Rule] = set()
            stack: list[tuple[Rule, Iterator[Rule]]] = [(first, iter(leads[first]))]
            path.append(first)
            on_path.add(first)
            while stack:
                rule, following = stack[-1]
                step = next(following, None)
                if step is None:
                    stack.pop()
                    path.pop()
                    on_path.discard(rule)
                    done.add(rule)
                    continue
                if step in on_path:
                    loop = [*path[path.index(step) :], step]
                    raise InvalidLexicon(
                        "the aliases loop: " + " -> ".join(repr(r.grapheme) for r in loop)
                    )
                if step in done or step not in leads:
                    continue
                stack.append((step, iter(leads[step])))
                path.append(step)
                on_path.add(step)


# The same few lexicons come with request after request.
_RECEIVED: OrderedDict[bytes, Lexicon] = OrderedDict()
_RECEIVED_ENTRIES = 16


def _received(digest: bytes, rules: bytes) -> Lexicon:
    """A pickled lexicon, rebuilt only the first time this process sees it."""
    found = _RECEIVED.get(digest)
    if found is None:
        found = Lexicon(pickle.loads(rules))
        _RECEIVED[digest] = found
        while len(_RECEIVED) > _RECEIVED_ENTRIES:
            _RECEIVED.popitem(last=False)
    return found


def _is_word(character: str) -> bool:
    return character.isalnum() or character == "_"


EMPTY = Lexicon()


# --- files --------------------------------------------------------------------------------

PLS_NAMESPACE = "http://www.w3.org/2005/01/pronunciation-lexicon"


def load_lexicon(path: Path) -> Lexicon:
    """A lexicon from a PLS, YAML or JSON file. Raises `InvalidLexicon`."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise InvalidLexicon(f"{path}: {size} bytes; a lexicon file has at most {MAX_BYTES}")
    data = path.read_bytes()
    suffix = path.suffix.lower()
    try:
        if suffix in (".pls", ".xml"):
            return parse_pls(data)
        if suffix in (".yaml", ".yml"):
            return parse_rules_document(data, yaml_=True)
        return parse_rules_document(data)
    except InvalidLexicon as error:
        raise InvalidLexicon(f"{path}: {error}") from None


def parse_rules_document(data: bytes | str, *, yaml_: bool = False) -> Lexicon:
    if len(data) > MAX_BYTES:
        raise InvalidLexicon(f"{len(data)} bytes; a lexicon has at most {MAX_BYTES}")
    try:
        document = yaml.safe_load(data) if yaml_ else json.loads(data)
    except (ValueError, yaml.YAMLError) as error:
        raise InvalidLexicon(f"not valid {'YAML' if yaml_ else 'JSON'}: {error}") from None
    if isinstance(document, Mapping):
        document = document.get("rules")
    return Lexicon.from_dicts(document)


def parse_pls(data: bytes | str) -> Lexicon:
    """Rules from a W3C PLS 1.0 file (case-sensitive, as PLS is); no DTD is read."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise InvalidLexicon(f"{len(raw)} bytes; a lexicon has at most {MAX_BYTES}")
    reader = _PlsReader()
    reader.read(raw)
    return Lexicon.from_dicts(reader.rules)


class _PlsReader:
    def __init__(self) -> None:
        self.rules: list[dict[str, Any]] = []
        self._parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
        self._alphabet = "ipa"
        self._graphemes: list[str] = []
        self._said: tuple[str, str, str] | None = None  # (kind, text, alphabet)
        self._element: tuple[str, str] | None = None  # (kind, alphabet) being read
        self._text: list[str] = []
        self._depth = 0
        self._lexemes = 0

    def read(self, data: bytes) -> None:
        parser = self._parser
        parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
        parser.StartDoctypeDeclHandler = self._refuse_dtd
        parser.EntityDeclHandler = self._refuse_dtd
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._text.append
        try:
            parser.Parse(data, True)
        except xml.parsers.expat.ExpatError as error:
            raise InvalidLexicon(
                f"not a valid PLS document: {xml.parsers.expat.ErrorString(error.code)} at line "
                f"{error.lineno}, column {error.offset + 1}"
            ) from None

    def _where(self) -> str:
        return f"line {self._parser.CurrentLineNumber}"

    def _refuse_dtd(self, *_: object) -> None:
        raise InvalidLexicon(f"a DTD or entity declaration is not taken ({self._where()})")

    def _start(self, tag: str, attributes: dict[str, str]) -> None:
        self._depth += 1
        if self._depth > 8:
            raise InvalidLexicon(f"elements nest too deep for a lexicon ({self._where()})")
        name = tag.rpartition(" ")[2]
        alphabet = attributes.get("alphabet")
        if name == "lexicon" and alphabet:
            self._alphabet = alphabet
        elif name == "lexeme":
            self._lexemes += 1
            if self._lexemes > MAX_RULES:
                raise InvalidLexicon(f"more than {MAX_RULES} lexemes")
            self._graphemes, self._said = [], None
        elif name in ("grapheme", "phoneme", "alias"):
            self._element = (name, alphabet or self._alphabet)
            self._text.clear()

    def _end(self, tag: str) -> None:
        self._depth -= 1
        name = tag.rpartition(" ")[2]
        if self._element is not None and name == self._element[0]:
            text = "".join(self._text).strip()
            kind, alphabet = self._element
            self._element = None
            if kind == "grapheme":
                self._graphemes.append(text)
            elif self._said is None:
                self._said = (kind, text, alphabet)
        elif name == "lexeme":
            if self._said is None:
                raise InvalidLexicon(f"a lexeme with no phoneme or alias ({self._where()})")
            kind, text, alphabet = self._said
            if not self._graphemes:
                raise InvalidLexicon(f"a lexeme with no grapheme ({self._where()})")
            for grapheme in self._graphemes:
                rule: dict[str, Any] = {"string_to_replace": grapheme, "type": kind, kind: text}
                if kind == "phoneme":
                    rule["alphabet"] = alphabet
                self.rules.append(rule)
