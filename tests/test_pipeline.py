"""Rendering: engine PCM to encoded chunks, timed where the engine runs."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk
from speechgate.engines import SynthesisRequest, load_engine
from speechgate.engines.base import Engine, EngineConfig, Voice
from speechgate.pipeline import SEGMENT_PAUSE, OutputSpec, render, speak_segments, speak_timed
from speechgate.text.prepare import Silence, Speech, TextOptions
from speechgate.text.rewrite import Rewrite
from speechgate.text.segment import SegmentLimits
from speechgate.timing import TimedChunk, WordTime, word_spans


def test_chunks_carry_the_time_since_rendering_began() -> None:
    engine = load_engine(EngineConfig("espeak"))
    try:
        voice = engine.voices()[0].id
        started = time.perf_counter()
        chunks = list(
            render(
                engine,
                SynthesisRequest("First sentence here. And a second one.", voice),
                OutputSpec(AudioFormat.PCM, 24000),
            )
        )
        total = time.perf_counter() - started
    finally:
        engine.close()
    elapsed = [chunk.elapsed for chunk in chunks]
    assert len(chunks) > 2
    assert elapsed == sorted(elapsed)
    assert 0 < elapsed[0] < elapsed[-1] <= total


class _Clicks:
    """A deterministic WordTimer: every word is 0.2 s of tone after 0.1 s of silence, and says
    so; `speed` shortens both."""

    name = "clicks"
    sample_rate = 16000
    supports_instructions = supports_seed = blends_voices = phonemes = False

    def voices(self) -> list[Voice]:
        return [Voice("v", "v")]

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        return (chunk.pcm for chunk in self.synthesize_timed(request))

    def synthesize_timed(self, request: SynthesisRequest) -> Iterator[TimedChunk]:
        gap, tone = 0.1 / request.speed, 0.2 / request.speed
        for index, (start, end) in enumerate(word_spans(request.text)):
            begin = index * (gap + tone) + gap
            samples = np.zeros(round((gap + tone) * self.sample_rate), np.int16)
            samples[round(gap * self.sample_rate) :] = 9000
            word = WordTime(start, end, begin, begin + tone)
            yield TimedChunk(PcmChunk(samples, self.sample_rate), (word,))

    def close(self) -> None:
        pass


def _spoken(
    engine: Engine, text: str, speed: float = 1.0, limits: SegmentLimits | None = None
) -> tuple[PcmChunk, list[WordTime]]:
    request = SynthesisRequest(text, engine.voices()[0].id, speed=speed)
    chunks = list(speak_timed(engine, request, limits=limits))
    audio = PcmChunk(np.concatenate([c.pcm.samples for c in chunks]), engine.sample_rate)
    return audio, [word for chunk in chunks for word in chunk.words]


def test_word_times_take_in_the_pauses_between_segments_and_the_speed() -> None:
    # At twice the speed, the pause between sentences is half as long, as the speech is.
    # Two segments: the second starts after the first's audio (0.9 s) and the pause.
    text = "\tOne two three. Four five."
    _, words = _spoken(_Clicks(), text)
    assert [text[w.start_char : w.end_char] for w in words] == [
        "One",
        "two",
        "three",
        "Four",
        "five",
    ]
    second = 0.9 + SEGMENT_PAUSE
    expected = [0.1, 0.4, 0.7, second + 0.1, second + 0.4]
    assert np.allclose([w.start_s for w in words], expected)
    _, fast = _spoken(_Clicks(), text, speed=2.0)
    assert np.allclose(
        [w.start_s for w in fast],
        [0.05, 0.2, 0.35, 0.45 + SEGMENT_PAUSE / 2 + 0.05, 0.45 + SEGMENT_PAUSE / 2 + 0.2],
    )


def test_a_slow_engine_speaks_the_first_clause_alone_and_goes_on_without_a_pause() -> None:
    # Each word 0.3 s; the engine speaks a clause's pause itself, so none is added at the cut,
    # but the sentence end still gets its own.
    text = "One two three four, five six. Seven."
    engine = _Clicks()
    request = SynthesisRequest(text, "v")
    slow = SegmentLimits.for_speed(15.0)
    # Two segments by default, three when slow.
    for limits, between in ((None, 1), (slow, 2)):
        rendered = render(engine, request, OutputSpec(AudioFormat.PCM, 16000), limits=limits)
        assert sum(chunk.between_segments for chunk in rendered) == between
    audio, words = _spoken(engine, text, limits=slow)
    assert [text[w.start_char : w.end_char] for w in words][3:5] == ["four", "five"]
    third = 1.8 + SEGMENT_PAUSE
    assert np.allclose([w.start_s for w in words], [0.1, 0.4, 0.7, 1.0, 1.3, 1.6, third + 0.1])
    assert audio.num_samples == round(2.1 * engine.sample_rate) + round(
        SEGMENT_PAUSE * engine.sample_rate
    )
    # The cut is faded: no step (a click) where the second segment starts.
    join = round(1.2 * engine.sample_rate)
    assert abs(int(audio.samples[join - 1])) < 100


def test_an_engine_without_word_times_gets_them_estimated_from_its_audio() -> None:
    class Untimed(_Clicks):
        synthesize_timed = None  # type: ignore[assignment]

        def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
            return (chunk.pcm for chunk in _Clicks.synthesize_timed(self, request))

    text = "Aa bb. Cc dd ee."
    audio, words = _spoken(Untimed(), text)
    assert [text[w.start_char : w.end_char] for w in words] == ["Aa", "bb", "Cc", "dd", "ee"]
    assert [w.start_s for w in words] == sorted(w.start_s for w in words)
    assert words[0].start_s >= 0
    assert words[-1].end_s <= audio.duration


def test_espeak_word_times_map_to_the_clients_text_and_lie_on_its_audio() -> None:
    text = '  "Dr. Okafor paid $1,249.99\x00 on 3 March \u2014 naïve, wasn\'t it?"\n\nYes!  '
    engine = load_engine(EngineConfig("espeak"))
    try:
        audio, words = _spoken(engine, text)
        fast_audio, fast = _spoken(engine, text, speed=2.0)
    finally:
        engine.close()
    expected = [
        "Dr",
        "Okafor",
        "paid",
        "$1,249.99",
        "on",
        "3",
        "March",
        "naïve",
        "wasn't",
        "it",
        "Yes",
    ]
    for spoken, times in ((audio, words), (fast_audio, fast)):
        assert [text[w.start_char : w.end_char] for w in times] == expected
        starts = [w.start_s for w in times]
        assert starts == sorted(starts)
        assert all(w.start_s <= w.end_s for w in times)
        assert times[-1].end_s <= spoken.duration
        # Every word starts on sound: the 20 ms after its start are not silent.
        rate = spoken.sample_rate
        for word in times:
            window = spoken.samples[
                round(word.start_s * rate) : round((word.start_s + 0.02) * rate)
            ]
            assert np.abs(window.astype(np.int32)).max() > 180, text[
                word.start_char : word.end_char
            ]
    # espeak-ng speaks faster at speed 2 (words per minute): the words come about twice as soon.
    assert 0.4 < fast[-1].start_s / words[-1].start_s < 0.6


def test_rendered_chunks_carry_each_word_no_later_than_its_audio() -> None:
    text = "One two. Three four five."
    spec = OutputSpec(AudioFormat.PCM, 24000, word_times=True)
    chunks = list(render(_Clicks(), SynthesisRequest(text, "v"), spec))
    sent = 0.0
    words = []
    for chunk in chunks:
        for word in chunk.words:
            assert word.start_s >= sent
            words.append(text[word.start_char : word.end_char])
        sent += chunk.audio_seconds
    assert words == ["One", "two", "Three", "four", "five"]
    # Without asking, no words (and no cost of finding them).
    plain = render(_Clicks(), SynthesisRequest(text, "v"), OutputSpec(AudioFormat.PCM, 24000))
    assert all(not chunk.words for chunk in plain)


def _longest_inner_silence(pcm: PcmChunk) -> float:
    """Seconds of the longest run of quiet 20 ms frames between the first and last loud one."""
    frame = pcm.sample_rate // 50
    samples = pcm.samples.astype(np.float64)
    loud = [
        float(np.sqrt(np.mean(samples[i : i + frame] ** 2))) > 330
        for i in range(0, len(samples) - frame, frame)
    ]
    first, last = loud.index(True), len(loud) - loud[::-1].index(True)
    longest = run = 0
    for is_loud in loud[first:last]:
        run = 0 if is_loud else run + 1
        longest = max(longest, run)
    return longest * 0.02


@pytest.mark.parametrize("name", ["espeak", "piper"])
def test_an_abbreviation_before_a_name_is_read_without_a_sentence_pause(name: str) -> None:
    # espeak-ng (Piper's phonemizer too) ends a sentence at "Dr." before a capital.
    engine = load_engine(EngineConfig(name))
    try:
        voice = engine.voices()[0].id

        def spoken(text: str) -> PcmChunk:
            chunks = speak_segments(engine, SynthesisRequest(text, voice))
            return PcmChunk(np.concatenate([c.samples for c in chunks]), engine.sample_rate)

        titled = _longest_inner_silence(spoken("Doctor Okafor met Mister Smith."))
        abbreviated = _longest_inner_silence(spoken("Dr. Okafor met Mr. Smith."))
        two_sentences = _longest_inner_silence(spoken("Doctor Okafor left. Mister Smith met."))
    finally:
        engine.close()
    # No pause but a word's, where a sentence end's is there to be found (150 ms and more).
    assert abbreviated < titled + 0.08
    assert two_sentences > titled + 0.06


def test_word_times_in_a_compressed_stream_are_those_of_its_pcm() -> None:
    # AAC's priming frame is not sent (ADTS cannot mark it), and an MP3's LAME tag marks its
    # delay: a decoder plays the first sample first, so the words keep their PCM times.
    text = "One two. Three four five."
    request = SynthesisRequest(text, "v")

    def starts(fmt: AudioFormat) -> list[float]:
        spec = OutputSpec(fmt, 24000, word_times=True)
        return [w.start_s for chunk in render(_Clicks(), request, spec) for w in chunk.words]

    plain = starts(AudioFormat.PCM)
    assert np.allclose(starts(AudioFormat.AAC), plain)
    assert np.allclose(starts(AudioFormat.MP3), plain)


class _Open(_Clicks):
    """`_Clicks` that knows how many of its generators are running (started, not yet closed)."""

    def __init__(self) -> None:
        self.open = 0

    def synthesize_timed(self, request: SynthesisRequest) -> Iterator[TimedChunk]:
        self.open += 1
        try:
            yield from super().synthesize_timed(request)
        finally:
            self.open -= 1


def test_chunks_between_segments_come_when_the_engine_holds_nothing_of_the_request() -> None:
    engine = _Open()
    request = SynthesisRequest("One. Two words here. And three more words.", "v")
    seen = [
        (chunk.between_segments, engine.open)
        for chunk in render(engine, request, OutputSpec(AudioFormat.PCM, 16000, word_times=True))
    ]
    assert [open for between, open in seen if between] == [0, 0]
    assert any(open for _, open in seen)  # the count sees a segment being spoken


def _longest_quiet_run(pcm: PcmChunk) -> float:
    """Seconds of the longest run of samples quieter than -40 dBFS inside the speech."""
    loud = np.flatnonzero(np.abs(pcm.samples.astype(np.int32)) > 328)
    return float(np.max(np.diff(loud))) / pcm.sample_rate


@pytest.mark.parametrize("name", ["espeak", "piper"])
def test_a_break_asked_for_is_the_silence_heard_the_engines_own_cut_around_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "Hello there. Welcome back."
    cut = text.index(" W")
    blocks = (
        Speech(Rewrite.from_replacements(text, [(cut, len(text), "")])),
        Silence(1.5),
        Speech(Rewrite.from_replacements(text, [(0, cut + 1, "")])),
    )
    monkeypatch.setattr("speechgate.pipeline.prepare", lambda text, options: blocks)
    engine = load_engine(EngineConfig(name))
    try:
        request = SynthesisRequest(text, engine.voices()[0].id, text_options=TextOptions())
        chunks = list(speak_timed(engine, request))
    finally:
        engine.close()
    audio = PcmChunk(np.concatenate([c.pcm.samples for c in chunks]), engine.sample_rate)
    words = [w for chunk in chunks for w in chunk.words]
    welcome = next(w for w in words if text[w.start_char : w.end_char] == "Welcome")
    assert _longest_quiet_run(audio) == pytest.approx(1.5, abs=0.03)
    assert welcome.start_s > 1.5


def test_money_is_read_as_meant_and_timed_as_the_one_word_the_client_wrote() -> None:
    engine = load_engine(EngineConfig("espeak"))
    text = "It costs $5.20 today."
    try:
        voice = engine.voices()[0].id
        read = list(speak_timed(engine, SynthesisRequest(text, voice, text_options=TextOptions())))
        written = TextOptions(normalize=False)
        as_is = list(speak_timed(engine, SynthesisRequest(text, voice, text_options=written)))
    finally:
        engine.close()
    words = [w for chunk in read for w in chunk.words]
    assert [text[w.start_char : w.end_char] for w in words] == ["It", "costs", "$5.20", "today"]
    money = words[2]
    assert money.spoken is not None and money.spoken.startswith("five dollars")
    # "five dollars and twenty cents" takes longer to say than "dollar five point two zero"
    # would not: the word spans the whole of it, and ends before the next begins.
    assert money.end_s - money.start_s > 0.8
    assert money.end_s <= words[3].start_s + 1e-6
    assert all(w.spoken is None for w in words if w is not money)
    as_is_words = [w for chunk in as_is for w in chunk.words]
    assert all(w.spoken is None for w in as_is_words)
