from __future__ import annotations

from collections.abc import Generator

import numpy as np

from speechgate.audio.fade import fade_edges
from speechgate.audio.pcm import PcmChunk

RATE = 24000


def loud(samples: int, value: int = 20000) -> PcmChunk:
    return PcmChunk(np.full(samples, value, np.int16), RATE)


def test_the_stream_starts_and_ends_at_silence_and_keeps_its_length() -> None:
    chunks = [loud(2400), loud(2400), loud(2400)]
    out = list(fade_edges(chunks))
    joined = np.concatenate([c.samples for c in out])
    assert len(joined) == 7200
    assert joined[0] == 0 and abs(int(joined[-1])) < 200
    fade = round(0.005 * RATE)
    assert np.all(np.diff(joined[:fade].astype(int)) >= 0)  # a ramp, not a step
    assert np.all(joined[fade:-fade] == 20000)  # the speech itself is untouched


def test_a_single_short_chunk_is_faded_both_ways() -> None:
    (out,) = fade_edges([loud(50)])
    assert out.samples[0] == 0 and out.num_samples == 50


def test_closing_early_closes_the_source() -> None:
    closed = []

    def source() -> Generator[PcmChunk]:
        try:
            while True:
                yield loud(100)
        finally:
            closed.append(True)

    stream = fade_edges(source())
    next(stream)
    stream.close()
    assert closed == [True]


def test_nothing_in_nothing_out() -> None:
    assert list(fade_edges([])) == []


def test_each_chunk_leaves_as_it_comes_but_for_the_fade_out_it_may_need() -> None:
    """The first audio is not held back until a second chunk shows it was not the last."""
    pulled = 0

    def source() -> Generator[PcmChunk]:
        nonlocal pulled
        for _ in range(3):
            pulled += 1
            yield loud(2400)

    stream = fade_edges(source())
    fade = round(0.005 * RATE)
    first = next(stream)
    assert pulled == 1
    assert first.num_samples == 2400 - fade
    assert first.samples[0] == 0
    rest = list(stream)
    assert [chunk.num_samples for chunk in rest] == [2400, 2400, fade]
    assert abs(int(rest[-1].samples[-1])) < 200


def test_empty_chunks_neither_leave_nor_skip_the_fade_in() -> None:
    out = list(fade_edges([loud(0), loud(2400), loud(0)]))
    joined = np.concatenate([c.samples for c in out])
    assert len(joined) == 2400 and joined[0] == 0 and abs(int(joined[-1])) < 200
