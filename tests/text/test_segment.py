from __future__ import annotations

import copy

import pytest

from speechgate.text.segment import (
    Segmenter,
    SegmentLimits,
    mask_abbreviation_periods,
    offsets,
    segment,
)

# Each text must come out as exactly these sentences: no split inside an abbreviation, an
# initial, a number, a URL or a quotation, and a split at every real sentence end.
CORPUS = [
    (
        "Dr. Smith met Mr. J. R. R. Tolkien at 3.14 p.m. yesterday. It was fun!",
        ["Dr. Smith met Mr. J. R. R. Tolkien at 3.14 p.m. yesterday.", "It was fun!"],
    ),
    (
        "Visit example.com/path?x=1.5 for details. Prices rose 3.5% to $1,000.50 today.",
        ["Visit example.com/path?x=1.5 for details.", "Prices rose 3.5% to $1,000.50 today."],
    ),
    (
        "\u201cHello there.\u201d She smiled. (It was late.) Then tea was served.",
        ["\u201cHello there.\u201d", "She smiled.", "(It was late.)", "Then tea was served."],
    ),
    (
        "We had e.g. apples, i.e. fruit, etc. and more. Then we left.",
        ["We had e.g. apples, i.e. fruit, etc. and more.", "Then we left."],
    ),
    (
        "The U.S. economy grew. The U.K. did not... Really? Yes!",
        ["The U.S. economy grew.", "The U.K. did not...", "Really?", "Yes!"],
    ),
    (
        "Version 2.0.1 shipped on Jan. 5 at 10 a.m. sharp.",
        ["Version 2.0.1 shipped on Jan. 5 at 10 a.m. sharp."],
    ),
    (
        "Call 555.123.4567 now! Or email a.b@example.org.",
        ["Call 555.123.4567 now!", "Or email a.b@example.org."],
    ),
    (
        "First paragraph without a stop\n\nSecond paragraph.",
        ["First paragraph without a stop", "Second paragraph."],
    ),
    (
        "Wait\u2026 what? \u00a1Hola! \u00bfQu\u00e9 tal?",
        ["Wait\u2026 what?", "\u00a1Hola!", "\u00bfQu\u00e9 tal?"],
    ),
]


@pytest.mark.parametrize(("text", "expected"), CORPUS)
def test_tricky_sentences_split_where_a_reader_pauses(text: str, expected: list[str]) -> None:
    assert segment(text, SegmentLimits(first=1000, longest=1000)) == expected


def test_nothing_is_lost_or_reordered() -> None:
    text = " ".join(sentence for _, sentences in CORPUS for sentence in sentences)
    assert " ".join(segment(text)).split() == text.split()


def test_first_segment_is_short_and_cut_at_a_clause() -> None:
    text = (
        "When the long awaited report finally arrived on Monday morning, the whole team gathered "
        "around the table, and nobody said a word for quite a while. Then they read it."
    )
    first, *rest = segment(text, SegmentLimits(first=100, longest=400))
    assert len(first) <= 100
    assert first.endswith(",")
    assert rest[-1] == "Then they read it."


# What a slow engine (Kokoro, ~1x real time) and a fast one (Piper, ~10x) speak in the time to
# first audio aimed at.
SLOW = SegmentLimits.for_speed(15.0)
FAST = SegmentLimits.for_speed(150.0)


@pytest.mark.parametrize(
    ("text", "limits", "expected"),
    [
        # A slow engine speaks the first clause alone, even in a short sentence...
        (
            "The weather today is sunny, but tomorrow it may rain.",
            SLOW,
            ["The weather today is sunny,", "but tomorrow it may rain."],
        ),
        (
            "Thanks for calling the line; an agent will be with you soon.",
            SLOW,
            ["Thanks for calling the line;", "an agent will be with you soon."],
        ),
        (
            "Your order has shipped \u2014 it should arrive by Friday.",
            SLOW,
            ["Your order has shipped \u2014", "it should arrive by Friday."],
        ),
        # ... at a conjunction where there is no clause punctuation, after enough words ...
        (
            "I would like a large pizza because I am very hungry tonight.",
            SLOW,
            ["I would like a large pizza", "because I am very hungry tonight."],
        ),
        # ... but never leaving one word (or two) alone before the cut.
        ("Sorry, go ahead.", SLOW, ["Sorry, go ahead."]),
        ("Well then, go ahead and try it.", SLOW, ["Well then, go ahead", "and try it."]),
        ("Yes please, go ahead now.", SLOW, ["Yes please, go ahead now."]),
        # No boundary, no cut: a short sentence stays whole.
        (
            "Hello there my good friend, how are you.",
            SLOW,
            ["Hello there my good friend,", "how are you."],
        ),
        ("Hello there my friend how are you.", SLOW, ["Hello there my friend how are you."]),
        # A fast engine keeps whole short sentences...
        (
            "The weather today is sunny.",
            FAST,
            ["The weather today is sunny."],
        ),
        ("One moment, please. I will check.", FAST, ["One moment, please.", "I will check."]),
        # ... but cuts a long first sentence at its clause (the last within its budget).
        (
            "The quarterly report is finished, and I have sent it to everyone on the team.",
            FAST,
            ["The quarterly report is finished,", "and I have sent it to everyone on the team."],
        ),
        (
            "First, we check the tickets, then the bags, and then we board the waiting plane.",
            FAST,
            ["First, we check the tickets, then the bags,", "and then we board the waiting plane."],
        ),
    ],
)
def test_the_first_segment_is_cut_at_a_clause_sized_to_the_engine(
    text: str, limits: SegmentLimits, expected: list[str]
) -> None:
    assert segment(text, limits) == expected


def test_only_the_first_sentence_is_cut_at_its_clause() -> None:
    text = "Right, so the plan is simple, and it works. Then we eat, and then we sleep well."
    assert segment(text, SLOW) == [
        "Right, so the plan is simple,",
        "and it works.",
        "Then we eat, and then we sleep well.",
    ]


def test_the_speed_sets_the_clause_budget() -> None:
    assert SegmentLimits.for_speed(None) == SegmentLimits()
    assert SegmentLimits.for_speed(100.0, seconds=0.5).first_clause == 50
    assert SegmentLimits.for_speed(15.0).first_clause < SegmentLimits.for_speed(150.0).first_clause


CLAUSE_TEXTS = [
    "The weather today is sunny, but tomorrow it may rain. Bring a coat.",
    "I would like a large pizza because I am very hungry tonight. Thanks!",
    "First, we check the tickets, then the bags, and then we board the plane.",
    "Sorry, go ahead. The line is yours, and I will wait.",
    "Thanks for calling the line; an agent will be with you soon, and we thank you.",
    "Hello there my good friend how are you. I am fine, and you?",
]


@pytest.mark.parametrize("limits", [SLOW, FAST, SegmentLimits.for_speed(60.0)])
@pytest.mark.parametrize("text", CLAUSE_TEXTS)
def test_a_clause_cut_fed_piece_by_piece_matches_the_whole_text(
    text: str, limits: SegmentLimits
) -> None:
    for size in (1, 3):
        segmenter = Segmenter(limits)
        pieces = [p for i in range(0, len(text), size) for p in segmenter.feed(text[i : i + size])]
        pieces += segmenter.flush()
        assert pieces == segment(text, limits)


def test_overlong_sentences_are_cut_at_the_limit() -> None:
    words = "word " * 300
    pieces = segment(words.strip(), SegmentLimits(first=50, longest=120))
    assert all(len(piece) <= 120 for piece in pieces)
    assert " ".join(pieces).split() == words.split()


def test_an_unbroken_token_is_cut_at_the_limit() -> None:
    pieces = segment("x" * 250, SegmentLimits(first=100, longest=100))
    assert [len(piece) for piece in pieces] == [100, 100, 50]


def test_a_phoneme_block_is_never_cut() -> None:
    # IPA's "." parts syllables; before a stress mark it looks like a sentence's end.
    assert segment("Say [[ hə. \u02c8loʊ ]] now. Next one.") == [
        "Say [[ hə. \u02c8loʊ ]] now.",
        "Next one.",
    ]
    text = "Some words come before a block [[ " + "ə " * 30 + "]] and after."
    pieces = segment(text, SegmentLimits(first=40, longest=200))
    assert pieces == ["Some words come before a block", text[31:]]
    # A block longer than the limit is cut after it, not inside.
    long_block = "[[ " + "ə " * 30 + "]] and after."
    assert segment(long_block, SegmentLimits(first=20, longest=200))[0] == long_block[:65]


def test_incremental_feeding_matches_whole_text_one_character_at_a_time() -> None:
    text = " ".join(sentence for _, sentences in CORPUS for sentence in sentences)
    segmenter = Segmenter()
    pieces = [piece for char in text for piece in segmenter.feed(char)]
    pieces += segmenter.flush()
    assert pieces == segment(text)


def test_a_sentence_is_released_as_soon_as_the_next_one_starts() -> None:
    segmenter = Segmenter()
    assert list(segmenter.feed("Hello there.")) == []  # "there. next" could still follow
    assert list(segmenter.feed(" ")) == []
    assert list(segmenter.feed("H")) == ["Hello there."]
    assert list(segmenter.feed("ow are you")) == []
    assert list(segmenter.flush()) == ["How are you"]
    assert list(segmenter.flush()) == []


@pytest.mark.parametrize(
    ("written", "guess"),
    [
        ("Hello there.", "Hello there."),
        ("Hello there. ", "Hello there."),
        ("\u201cHello there.\u201d", "\u201cHello there.\u201d"),
        ("Is it? ", "Is it?"),
        ("It costs 3.", "It costs 3."),  # "14" may follow: a guess, not a certainty
        ("Hello there", None),
        ("Ask Dr.", None),  # an abbreviation never ends a sentence before a capital
        ("By J.", None),
        ("", None),
    ],
)
def test_tentative_is_the_segment_a_capital_would_complete(written: str, guess: str | None) -> None:
    segmenter = Segmenter()
    assert list(segmenter.feed(written)) == []
    assert segmenter.tentative() == guess


def test_tentative_is_right_whenever_a_sentence_follows_and_only_then() -> None:
    """At every point of every text: a guess is what the next capitalised word releases, and
    nothing the segmenter would release is ever missing its guess."""
    text = " ".join(sentence for _, sentences in CORPUS for sentence in sentences)
    segmenter = Segmenter()
    guessed = 0
    for char in text:
        guess = segmenter.tentative()
        if guess is not None:
            guessed += 1
            assert list(copy.deepcopy(segmenter).feed(" This")) == [guess]
        released = list(segmenter.feed(char))
        if released and char.isupper() and released[0] != guess:
            pytest.fail(f"{released[0]!r} came with no guess ({guess!r})")
    assert guessed


def test_a_wrong_guess_is_dropped_when_the_next_word_continues() -> None:
    segmenter = Segmenter()
    assert list(segmenter.feed("It costs 3.")) == []
    assert segmenter.tentative() == "It costs 3."
    assert list(segmenter.feed("14 today")) == []
    assert segmenter.tentative() is None
    assert list(segmenter.feed(", fine. and")) == []
    assert segmenter.tentative() is None


def test_whitespace_only_yields_nothing() -> None:
    assert segment("  \n\n  ") == []


@pytest.mark.parametrize(
    "dirty",
    [
        "Hello\u0000 world. Bye\u0007 now.",
        "Hello\u0085 world.\u001b[31m Bye\ud800 now\ufffe.\uffff",
        "Hello\u0000world. Bye\u009bnow.",
    ],
)
def test_control_characters_never_reach_a_segment(dirty: str) -> None:
    segments = segment(dirty)
    assert len(segments) == 2
    for text in segments:
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)
        assert not any(0xD800 <= ord(c) <= 0xDFFF or ord(c) in (0xFFFE, 0xFFFF) for c in text)
    assert segments[0].startswith("Hello") and "world" in segments[0]


def test_newlines_and_tabs_are_kept() -> None:
    assert segment("One\tline.\n\nTwo") == ["One\tline.", "Two"]


def test_offsets_find_each_segment_in_the_text_as_sent() -> None:
    # Leading space, a control character (spoken as a space) and a repeated sentence.
    text = "  Hi.\x00 Hi. Hi there, friend.\n\nHi."
    pieces = segment(text)
    found = list(offsets(text, pieces))
    assert [
        text[at : at + len(piece)].replace("\x00", " ")
        for at, piece in zip(found, pieces, strict=True)
    ] == pieces
    assert found == sorted(found)
    assert found[0] == 2


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Dr. Okafor met Mr. Smith.", "Dr  Okafor met Mr  Smith."),
        ("J. R. R. Tolkien wrote it.", "J  R  R  Tolkien wrote it."),
        ("He left. Then she came.", "He left. Then she came."),  # sentence ends stay
        ("Use e.g. this one.", "Use e.g. this one."),  # before lower case: no split to undo
        ("It costs $5. No more.", "It costs $5. No more."),
    ],
)
def test_periods_that_end_no_sentence_are_masked_before_a_capital(text: str, masked: str) -> None:
    assert mask_abbreviation_periods(text) == masked
    assert len(mask_abbreviation_periods(text)) == len(text)  # offsets still point into text
