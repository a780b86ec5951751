"""The bench's text sets."""

from __future__ import annotations

import pytest

from speechgate.bench.overhead import first_audio_texts
from speechgate.bench.texts import TEXTS, text_set
from speechgate.lanes import BALANCE
from speechgate.text.segment import segment


def test_the_sets_hold_their_kinds() -> None:
    assert text_set("all") == TEXTS
    for kind in ("short", "medium", "long"):
        texts = text_set(kind)
        assert texts and all(text.kind == kind for text in texts)
    with pytest.raises(ValueError, match="all, short, medium, long"):
        text_set("longest")


def test_long_texts_are_paragraphs_whose_sentences_pair_up() -> None:
    # What they are for: a lone request with many segments of like lengths, as a page read
    # aloud, which a wide worker speaks two at a time.
    for text in text_set("long"):
        parts = segment(text.text)
        assert len(parts) >= 7
        # After the first, the pairs a wide worker would make are balanced enough to go.
        for first, second in zip(parts[1::2], parts[2::2], strict=False):
            assert max(len(first), len(second)) <= BALANCE * (len(first) + len(second))


def test_the_first_audio_pairs_speak_short_texts_or_the_first_segments_of_longer_ones() -> None:
    short = [text.text for text in text_set("short")]
    assert first_audio_texts(text_set("all")) == short
    # A set without short texts (once a division by zero): each text's first segment.
    for kind in ("medium", "long"):
        firsts = first_audio_texts(text_set(kind))
        assert len(firsts) == len(text_set(kind))
        for first, text in zip(firsts, text_set(kind), strict=True):
            assert text.text.startswith(first) and len(first) < len(text.text)
