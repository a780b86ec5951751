import pytest

from speechgate.text.rewrite import Rewrite


def test_an_identity_maps_every_character_to_itself() -> None:
    rewrite = Rewrite.identity("hello world")
    assert rewrite.spoken == "hello world"
    assert rewrite.source_span(6, 11) == (6, 11)


def test_a_replaced_word_maps_to_the_whole_of_what_it_replaced() -> None:
    rewrite = Rewrite.from_replacements("It costs $5.20 today.", [(9, 14, "five dollars twenty")])
    assert rewrite.spoken == "It costs five dollars twenty today."
    five, dollars = rewrite.spoken.index("five"), rewrite.spoken.index("dollars")
    assert rewrite.source_span(five, five + 4) == (9, 14)
    assert rewrite.source_span(dollars, dollars + 7) == (9, 14)
    today = rewrite.spoken.index("today")
    assert rewrite.source_span(today, today + 5) == (15, 20)
    assert rewrite.source_span(0, 2) == (0, 2)


def test_deletions_and_insertions_keep_the_rest_in_place() -> None:
    rewrite = Rewrite.from_replacements("a 🎉 b", [(2, 3, ""), (5, 5, " c")])
    assert rewrite.spoken == "a  b c"
    assert rewrite.source_span(3, 4) == (4, 5)
    assert rewrite.source_span(5, 6) == (5, 5)


def test_two_rewrites_compose_to_one_from_the_first_source() -> None:
    first = Rewrite.from_replacements("Dr. Lee paid $3.", [(0, 3, "Doctor"), (13, 15, "3 dollars")])
    assert first.spoken == "Doctor Lee paid 3 dollars."
    second = Rewrite.from_replacements(first.spoken, [(16, 17, "three")])
    both = first.then(second)
    assert both.source == "Dr. Lee paid $3."
    assert both.spoken == "Doctor Lee paid three dollars."
    three = both.spoken.index("three")
    assert both.source_span(three, three + 5) == (13, 15)
    assert both.source_span(both.spoken.index("dollars"), both.spoken.index("dollars") + 7) == (
        13,
        15,
    )
    assert both.source_span(7, 10) == (4, 7)
    assert both.source_span(0, 6) == (0, 3)


def test_a_rewrite_of_another_text_cannot_follow() -> None:
    with pytest.raises(ValueError):
        Rewrite.identity("a").then(Rewrite.identity("b"))


def test_replacements_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError):
        Rewrite.from_replacements("abcdef", [(3, 4, "x"), (1, 2, "y")])
