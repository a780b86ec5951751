"""Captions from word times: cue grouping, and SRT and WebVTT files ffmpeg reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from speechgate.captions import Cue, cues, write_captions
from speechgate.timing import WordTime, word_spans
from tests.helpers.captions import read_captions


def timed(text: str, step: float = 0.5) -> list[WordTime]:
    """Every word of `text`, `step` seconds each, a tenth of that apart."""
    return [
        WordTime(start, end, index * step, index * step + step * 0.9)
        for index, (start, end) in enumerate(word_spans(text))
    ]


def test_a_cue_ends_at_a_sentence_end_or_after_seven_words() -> None:
    text = 'Hello,  "world"!\nOne two three four five six seven eight nine. (The end.)'
    found = cues(text, timed(text))
    assert [cue.text for cue in found] == [
        'Hello, "world"!',
        "One two three four five six seven",
        "eight nine.",
        "(The end.)",
    ]
    words = timed(text)
    assert found[0] == Cue(words[0].start_s, words[1].end_s, 'Hello, "world"!')
    assert found[-1].end == words[-1].end_s


def test_caption_text_is_escaped_where_the_format_needs_it(tmp_path: Path) -> None:
    text = "Fish & chips --> <cheap>."
    for suffix in (".srt", ".vtt"):
        path = tmp_path / f"out{suffix}"
        assert write_captions(path, text, timed(text)) == 1
        (cue,) = read_captions(path)
        assert (cue.start, cue.end) == pytest.approx((0.0, timed(text)[-1].end_s))
        if suffix == ".vtt":
            assert "&amp;" in path.read_text() and cue.text == "Fish & chips -> <cheap>."
        else:  # SRT has no escapes (players read "<...>" as a tag); only "-->" must go
            assert path.read_text().splitlines()[2] == "Fish & chips -> <cheap>."


def test_files_read_back_cue_for_cue_past_an_hour(tmp_path: Path) -> None:
    text = " ".join(f"Sentence {n} ends here." for n in range(4))
    # Long enough to need hours: each word lasts 20 minutes.
    words = timed(text, step=1200)
    expected = cues(text, words)
    assert len(expected) == 4
    for suffix in (".srt", ".vtt"):
        path = tmp_path / f"out{suffix}"
        write_captions(path, text, words)
        parsed = read_captions(path)
        assert [cue.text for cue in parsed] == [cue.text for cue in expected]
        times = [time for cue in parsed for time in (cue.start, cue.end)]
        assert times == pytest.approx([t for cue in expected for t in (cue.start, cue.end)])
    assert "01:20:00,000 --> 02:38:00,000" in (tmp_path / "out.srt").read_text()
    assert (tmp_path / "out.vtt").read_text().startswith("WEBVTT\n\n00:00:00.000 --> ")


def test_another_suffix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.srt or \.vtt"):
        write_captions(tmp_path / "out.txt", "Hi.", timed("Hi."))
