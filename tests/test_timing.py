"""Word and character times: words of the client's text, anchors to words, fitting to sound."""

from __future__ import annotations

import re

import numpy as np
import pytest

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.stretch import stretch
from speechgate.text.rewrite import Rewrite
from speechgate.timing import (
    CharacterAligner,
    SourceWords,
    TimedChunk,
    WordFeed,
    WordsFromCharacters,
    WordTime,
    carry_words,
    character_alignment,
    estimate_words,
    first_sounds,
    lead_in,
    trim_ends,
    word_onsets,
    word_spans,
    words_from_anchors,
)

RATE = 16000


def bursts(*spans: tuple[float, float], seconds: float) -> PcmChunk:
    """A tone during each (start, end) of `spans`, silence elsewhere."""
    samples = np.zeros(round(seconds * RATE), np.int16)
    for start, end in spans:
        first, last = round(start * RATE), round(end * RATE)
        samples[first:last] = (8000 * np.sin(np.arange(last - first) * 0.3)).astype(np.int16)
    return PcmChunk(samples, RATE)


def said(text: str, words: list[WordTime]) -> list[str]:
    return [text[word.start_char : word.end_char] for word in words]


def test_words_are_tokens_without_their_edge_punctuation() -> None:
    text = " (Hello,\" said Dr. O'Neil: $3.14 \u2014 1,234 e-mails... ok?"
    assert [text[a:b] for a, b in word_spans(text)] == [
        "Hello",
        "said",
        "Dr",
        "O'Neil",
        "$3.14",
        "\u2014",  # punctuation alone stays a token: an engine may still say it ("&")
        "1,234",
        "e-mails",
        "ok",
    ]


def test_a_phoneme_block_is_one_word_brackets_and_all() -> None:
    text = "Say [[ hə loʊ ]], ([[noʊ]]) now."
    assert [text[a:b] for a, b in word_spans(text)] == [
        "Say",
        "[[ hə loʊ ]]",
        ",",
        "(",
        "[[noʊ]]",
        ")",
        "now",
    ]


def test_anchors_start_their_words_and_unanchored_words_are_interpolated() -> None:
    text = "one two three, - four"
    # "two" has no anchor (an engine merged it), "-" has none and is punctuation: not said.
    # The anchor at 3 (the space before "two") belongs to the word after it.
    anchors = [(0, 0.0), (8, 1.0), (17, 2.0)]
    words = words_from_anchors(text, anchors, end_s=3.0)
    assert said(text, words) == ["one", "two", "three", "four"]
    assert [w.start_s for w in words] == [0.0, 0.5, 1.0, 2.0]
    assert [w.end_s for w in words] == [0.5, 1.0, 2.0, 3.0]
    words = words_from_anchors(text, [(3, 0.4), (17, 2.0)], end_s=3.0)
    assert words[1].start_s == 0.4


def test_anchors_out_of_order_never_reverse_words() -> None:
    words = words_from_anchors("a b c", [(0, 1.0), (2, 0.5), (4, 2.0)], end_s=3.0)
    starts = [w.start_s for w in words]
    assert starts == sorted(starts)


def test_words_are_fitted_to_their_sound() -> None:
    pcm = bursts((0.1, 0.4), (0.7, 0.9), seconds=1.0)
    words = [WordTime(0, 3, 0.0, 0.6), WordTime(4, 7, 0.6, 1.0)]
    fitted = trim_ends(words, pcm)
    assert [round(w.start_s, 2) for w in fitted] == [0.1, 0.7]
    assert [round(w.end_s, 2) for w in fitted] == [0.4, 0.9]
    # The same words in a later chunk, given as times from the start of the stream.
    shifted = trim_ends([w.shifted(5.0) for w in words], pcm, offset=5.0)
    assert [round(w.start_s, 2) for w in shifted] == [5.1, 5.7]


def test_sound_before_the_first_word_of_a_whole_run_is_that_words() -> None:
    # An engine placed "Hi" at 0.2 s, but its sound starts at 0.1 s: in the audio of the whole
    # text nothing but "Hi" can be heard there. In a chunk of a stream it may be the last word
    # of the chunk before, so only `whole` moves it.
    pcm = bursts((0.1, 0.4), (0.7, 0.9), seconds=1.0)
    words = [WordTime(0, 2, 0.2, 0.6), WordTime(3, 6, 0.6, 1.0)]
    assert [round(w.start_s, 2) for w in trim_ends(words, pcm, whole=True)] == [0.1, 0.7]
    assert [round(w.start_s, 2) for w in trim_ends(words, pcm)] == [0.2, 0.7]
    # After a leading silence the first word still starts at its sound, not at 0.
    late = [WordTime(0, 2, 0.0, 0.6), WordTime(3, 6, 0.6, 1.0)]
    assert round(trim_ends(late, pcm, whole=True)[0].start_s, 2) == 0.1


def test_word_times_follow_their_audio_through_a_time_stretch() -> None:
    pcm = bursts((0.5, 0.8), (1.5, 1.9), seconds=2.0)
    words = (WordTime(0, 1, 0.5, 0.8), WordTime(2, 3, 1.5, 1.9))
    out = list(
        carry_words(
            lambda chunks: stretch(chunks, RATE, 2.0), iter([TimedChunk(pcm, words)]), 1 / 2.0
        )
    )
    stretched = PcmChunk(np.concatenate([chunk.pcm.samples for chunk in out]), RATE)
    carried = [w for chunk in out for w in chunk.words]
    assert [(w.start_s, w.end_s) for w in carried] == [(0.25, 0.4), (0.75, 0.95)]
    # The words are where their sound is in the stretched audio (WSOLA's windows blur edges).
    fitted = trim_ends(carried, stretched)
    for word, fit in zip(carried, fitted, strict=True):
        assert abs(fit.start_s - word.start_s) < 0.04
        assert abs(fit.end_s - word.end_s) < 0.04


def test_characters_share_their_words_time_and_gaps_share_the_pauses() -> None:
    text = "Hi, you."
    alignment = character_alignment(text, [WordTime(0, 2, 0.0, 0.2), WordTime(4, 7, 0.5, 0.8)])
    assert alignment.characters == list(text)
    assert alignment.character_start_times_seconds == [0.0, 0.1, 0.2, 0.35, 0.5, 0.6, 0.7, 0.8]
    assert alignment.character_end_times_seconds == [0.1, 0.2, 0.35, 0.5, 0.6, 0.7, 0.8, 0.8]


def test_characters_aligned_as_the_words_come_are_the_whole_texts_alignment() -> None:
    text = "(Hi), you two!"
    words = [WordTime(1, 3, 0.1, 0.3), WordTime(6, 9, 0.5, 0.8), WordTime(10, 13, 0.9, 1.2)]
    whole = character_alignment(text, words)
    aligner = CharacterAligner(text)
    parts = [aligner.add(words[:1]), aligner.add([]), aligner.add(words[1:]), aligner.finish()]
    # The first word's batch holds the text up to its end; the gap after it waits for "you".
    assert [len(part.characters) for part in parts] == [3, 0, 10, 1]
    assert [c for part in parts for c in part.characters] == whole.characters
    starts = [t for part in parts for t in part.character_start_times_seconds]
    ends = [t for part in parts for t in part.character_end_times_seconds]
    assert starts == whole.character_start_times_seconds
    assert ends == whole.character_end_times_seconds


def test_words_come_back_from_their_characters_times_once_each_is_whole() -> None:
    text = "(Hi), you two!"
    words = [WordTime(1, 3, 0.1, 0.3), WordTime(6, 9, 0.5, 0.8), WordTime(10, 13, 0.9, 1.2)]
    alignment = character_alignment(text, words)
    back = WordsFromCharacters(text)
    found = []
    for first, last in ((0, 7), (7, 12), (12, len(text))):
        found.append(
            back.add(
                alignment.characters[first:last],
                alignment.character_start_times_seconds[first:last],
                alignment.character_end_times_seconds[first:last],
            )
        )
    # "you" is whole only with the second batch, "two" with the third.
    assert [[(w.start_char, w.end_char) for w in batch] for batch in found] == [
        [(1, 3)],
        [(6, 9)],
        [(10, 13)],
    ]
    assert [w for batch in found for w in batch] == words


def test_characters_that_are_not_the_texts_next_are_refused() -> None:
    back = WordsFromCharacters("Hi you")
    with pytest.raises(ValueError):
        back.add(["H", "o"], [0.0, 0.1], [0.1, 0.2])
    with pytest.raises(ValueError):
        back.add(["H", "i"], [0.0], [0.1, 0.2])


def test_a_word_feed_hands_each_word_over_once() -> None:
    feed = WordFeed()
    feed.add([WordTime(0, 2, 0.0, 0.2)])
    feed.add([WordTime(3, 5, 0.3, 0.5)])
    assert [w.start_char for w in feed.take()] == [0, 3]
    assert feed.take() == ()


def test_a_word_is_found_among_the_phonemes_of_the_whole_text() -> None:
    # "1,234" is several words when spoken, and "the" changes in context; punctuation,
    # stress marks and spaces differ between the word alone and the text.
    stress = "\u02c8"
    words = [list("ðə"), list(f"w{stress}ʌn θ{stress}aʊzənd"), list(f"k{stress}æts.")]
    spoken = list(f"ði w{stress}ʌn θ{stress}aʊzənd, k{stress}æts!")
    firsts = first_sounds(words, spoken)
    assert [spoken[i] if i is not None else None for i in firsts] == ["ð", "w", "k"]
    assert firsts == [0, 3, 18]


def test_a_word_is_heard_from_the_space_and_stress_marks_before_its_first_sound() -> None:
    # Duration models voice a word's onset in the frames of the space (and stress mark) in
    # front of it; a comma's frames are a pause, so a word after one starts after it.
    stress = "\u02c8"
    words = [list("ðə"), list(f"k{stress}æts"), list(f"s{stress}æt"), list(f"{stress}æn")]
    spoken = list(f"ðə k{stress}æts, s{stress}æt {stress}æn.")
    assert first_sounds(words, spoken) == [0, 3, 10, 16]
    assert word_onsets(words, spoken) == [0, 2, 9, 14]
    assert [spoken[i] for i in (2, 9, 14)] == [" ", " ", " "]
    # Never past the start, and a word with no space before it keeps its first sound.
    assert lead_in(list(f" {stress}æ"), 2) == 0
    assert lead_in(list("a,b"), 2) == 2


def test_an_estimate_gives_each_phrase_its_run_of_sound() -> None:
    # Two phrases, two runs of sound: "world" starts with the second run, not by its letters.
    pcm = bursts((0.1, 0.9), (1.5, 1.8), seconds=2.0)
    text = "Hello there, world."
    words = estimate_words(text, pcm)
    assert said(text, words) == ["Hello", "there", "world"]
    assert [round(w.start_s, 2) for w in words] == [0.1, round(0.1 + 0.8 * 5 / 10, 2), 1.5]
    assert round(words[-1].end_s, 2) == 1.8


def test_the_words_said_for_one_written_word_become_that_word() -> None:
    rewrite = Rewrite.from_replacements("Pay $5.20 now.", [(4, 9, "five dollars and twenty cents")])
    spoken = rewrite.spoken  # "Pay five dollars and twenty cents now."
    said = [(m.start(), m.end()) for m in re.finditer(r"\w+", spoken)]
    engine_words = [WordTime(s, e, 0.1 * i, 0.1 * i + 0.08) for i, (s, e) in enumerate(said)]
    words = SourceWords(rewrite)
    # Fed a word at a time, as a streaming engine tells them.
    found = [word for one in engine_words for word in words.feed([one], 1.0)]
    found += words.flush()
    assert [(w.start_char, w.end_char) for w in found] == [(0, 3), (4, 9), (10, 13)]
    pay, money, now = found
    assert (pay.start_s, pay.spoken) == (1.0, None)
    assert money.start_s == pytest.approx(1.1)
    assert money.end_s == pytest.approx(1.5 + 0.08)
    assert money.spoken == "five dollars and twenty cents"
    assert (now.start_s, now.spoken) == (pytest.approx(1.6), None)


def test_a_segment_later_in_the_spoken_text_maps_from_where_it_starts() -> None:
    rewrite = Rewrite.from_replacements("Hi. Dr. No.", [(4, 7, "Doctor")])
    start = rewrite.spoken.index("Doctor")
    words = SourceWords(rewrite)
    # Held: a next word might still be part of "Dr.".
    assert words.feed([WordTime(0, 6, 0.0, 0.3)], 2.0, start) == ()
    words = SourceWords(rewrite)
    held = words.feed([WordTime(0, 6, 0.0, 0.3), WordTime(7, 9, 0.35, 0.5)], 2.0, start)
    assert [(w.start_char, w.end_char, w.spoken) for w in held] == [(4, 7, "Doctor"), (8, 10, None)]


def test_the_normalized_alignment_spells_what_was_said() -> None:
    words = [WordTime(0, 3, 0.0, 0.2), WordTime(4, 9, 0.3, 1.0, "five dollars")]
    written = character_alignment("Pay $5.20", words)
    said = character_alignment("Pay $5.20", words, spoken=True)
    assert "".join(written.characters) == "Pay $5.20"
    assert "".join(said.characters) == "Pay five dollars"
    assert len(said.character_start_times_seconds) == len("Pay five dollars")
    assert said.character_start_times_seconds[4] == pytest.approx(0.3)
    assert said.character_end_times_seconds[-1] == pytest.approx(1.0)


def test_a_word_read_across_two_segments_is_one_word() -> None:
    # A phone number's groups, cut into two segments at the comma between them.
    text = "Call (555) 123-4567 now."
    rewrite = Rewrite.from_replacements(text, [(5, 19, "five five five, one two three")])
    cut = rewrite.spoken.index("one")
    words = SourceWords(rewrite)
    first = words.feed([WordTime(0, 4, 0.0, 0.2), WordTime(5, 9, 0.3, 0.5)], 0.0, 0)
    second = words.feed([WordTime(0, 3, 0.0, 0.2), WordTime(14, 17, 0.9, 1.1)], 2.0, cut)
    found = [*first, *second, *words.flush()]
    assert [(w.start_char, w.end_char) for w in found] == [(0, 4), (5, 19), (20, 23)]
    number = found[1]
    assert (number.start_s, number.end_s) == (pytest.approx(0.3), pytest.approx(2.2))
