"""A lone job's later segments spoken two at a time, side by side."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk
from speechgate.engines import load_engine
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.lanes import Lanes
from speechgate.pipeline import OutputSpec, render
from tests.helpers.lanes import PAIR, TEXT, Recorder


def _pcm(engine: Recorder, lanes: Lanes | None) -> bytes:
    spec = OutputSpec(AudioFormat.PCM, engine.sample_rate)
    return b"".join(c.data for c in render(engine, SynthesisRequest(TEXT, "v"), spec, lanes=lanes))


def test_a_wide_job_speaks_its_later_segments_in_pairs_at_once_and_in_order() -> None:
    engine = Recorder(meet=PAIR)
    lanes = Lanes(engine, (1, 2))
    lanes.set_width(2)
    together = _pcm(engine, lanes)
    # The first segment alone and wide; the next two at once (they met at the barrier), each
    # one thread wide; the last one, left without a partner, alone and wide again.
    texts = [text for text, _, _ in engine.calls]
    assert texts[0] == "Hi there." and engine.calls[0][1:] == (2, 1)
    assert sorted(texts[1:3]) == ["Aaaa bbbb cccc.", "Dddd eeee ffff."]
    assert [width for _, width, _ in engine.calls[1:3]] == [1, 1]
    assert max(running for _, _, running in engine.calls[1:3]) == 2
    assert engine.calls[3] == ("Gggg hhhh iiii.", 2, 1)
    assert lanes.pairs == 1 and engine.width == 2
    # The same audio as one segment after another, in the text's order.
    assert together == _pcm(Recorder(), None)
    lanes.close()


@pytest.mark.parametrize(
    ("widths", "width", "text"),
    [
        # Narrow: no room for two.
        ((1, 2), 1, TEXT),
        # Wide, but one of the two is three times the other: it would keep the pair waiting
        # longer than both on both cores.
        ((1, 2), 2, "Hi there. Aaaa bbbb cccc dddd eeee ffff gggg. Hhhh iiii."),
        # Four cores: a pair a core each would leave two idle that one wide segment uses.
        ((1, 4), 4, TEXT),
    ],
)
def test_segments_go_one_at_a_time_when_the_job_is_narrow_wider_than_a_pair_or_unbalanced(
    widths: tuple[int, int], width: int, text: str
) -> None:
    engine = Recorder()
    lanes = Lanes(engine, widths)
    lanes.set_width(width)
    spec = OutputSpec(AudioFormat.PCM, engine.sample_rate)
    list(render(engine, SynthesisRequest(text, "v"), spec, lanes=lanes))
    assert lanes.pairs == 0
    assert all(running == 1 for _, _, running in engine.calls)
    assert {w for _, w, _ in engine.calls} == {width}


def test_an_engine_that_cannot_share_itself_never_runs_two_segments_at_once() -> None:
    engine = Recorder()
    engine.side_by_side = False
    lanes = Lanes(engine, (1, 2))
    lanes.set_width(2)
    _pcm(engine, lanes)
    assert lanes.pairs == 0
    assert all(running == 1 for _, _, running in engine.calls)


@pytest.mark.parametrize("side_by_side", [True, False])
def test_the_helper_thread_is_there_before_any_pair(side_by_side: bool) -> None:
    # So the pool's moves of a worker's threads between cores, which list them first, find it:
    # started by a later pair, it could be started amid a move and keep the cores it inherits.
    engine = Recorder()
    engine.side_by_side = side_by_side
    before = {thread.ident for thread in threading.enumerate()}
    lanes = Lanes(engine, (1, 2))
    started = [t for t in threading.enumerate() if t.ident not in before]
    assert [t.name.startswith("speechgate-lane") for t in started] == [True] * side_by_side
    lanes.close()
    assert not any(thread.is_alive() for thread in started)


def test_a_failing_half_of_a_pair_fails_the_job_after_the_other_half_is_done() -> None:
    engine = Recorder(meet=PAIR, fail_on="Aaaa bbbb cccc.")
    lanes = Lanes(engine, (1, 2))
    lanes.set_width(2)
    with pytest.raises(RuntimeError, match="told to fail"):
        _pcm(engine, lanes)
    # Both halves ran (they met), the engine is idle and back at the job's width.
    assert len(engine.calls) == 3
    assert engine._running == 0 and engine.width == 2
    lanes.close()


def test_piper_speaks_a_pair_side_by_side_as_it_speaks_one_after_the_other() -> None:
    engine = load_engine(EngineConfig("piper", threads=1, max_threads=2))
    lanes = Lanes(engine, (1, 2))
    try:
        lanes.set_width(2)
        voice = engine.voices()[0].id
        text = (
            "Hello there. The sun is up over the quiet hills today. "
            "Birds are singing in the old trees by the river."
        )
        spec = OutputSpec(AudioFormat.PCM, engine.sample_rate, word_times=True)
        chunks = list(render(engine, SynthesisRequest(text, voice), spec, lanes=lanes))
    finally:
        lanes.close()
        engine.close()
    assert lanes.pairs == 1
    audio = PcmChunk(np.frombuffer(b"".join(c.data for c in chunks), np.int16), 22050)
    words = [w for c in chunks for w in c.words]
    # Every word, in order, on the audio; VITS samples noise, so lengths only roughly match
    # the ~5 s these words take.
    assert [text[w.start_char : w.end_char] for w in words] == text.replace(".", "").split()
    assert [w.start_s for w in words] == sorted(w.start_s for w in words)
    assert words[-1].end_s <= audio.duration
    assert 3.5 < audio.duration < 7.0
    assert np.abs(audio.samples.astype(np.int32)).max() > 3000
