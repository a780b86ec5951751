"""Voice blend spelling: "a(2)+b(1)"."""

from __future__ import annotations

import pytest

from speechgate.engines import blend


@pytest.mark.parametrize(
    ("voice", "parts"),
    [
        ("af_bella(2)+af_sky(1)", [("af_bella", 2.0), ("af_sky", 1.0)]),
        ("af_bella + af_sky", [("af_bella", 1.0), ("af_sky", 1.0)]),
        (" a ( 0.5 )+b(.25)+c(3.)", [("a", 0.5), ("b", 0.25), ("c", 3.0)]),
        ("alloy(1)", [("alloy", 1.0)]),
    ],
)
def test_blends_parse_and_spell_canonically(voice: str, parts: list[tuple[str, float]]) -> None:
    assert blend.is_blend(voice)
    assert blend.parse(voice) == parts
    assert blend.parse(blend.spell(parts)) == parts


@pytest.mark.parametrize("voice", ["a(0)+b", "a+", "+b", "a(-1)", "a(x)", "a(1)(2)", "a)+b"])
def test_malformed_blends_are_refused(voice: str) -> None:
    with pytest.raises(ValueError, match="malformed voice blend"):
        blend.parse(voice)


def test_a_plain_name_is_no_blend() -> None:
    assert not blend.is_blend("af_bella")
