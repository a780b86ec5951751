"""The pocket-tts engine on a tiny random-weight model, loaded through pocket-tts' real loader
(see tests/helpers/pocket.py).

torch, pocket-tts and the engine's module are imported by the tests that use them: they take
seconds to import, which every test process would pay to collect this module.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import huggingface_hub.constants
import numpy as np
import pytest

from speechgate.audio.pcm import PcmChunk
from speechgate.engines import load_engine
from speechgate.engines.base import Engine, EngineConfig, SynthesisRequest
from speechgate.voices.installed import InstalledVoice, Manifest, install
from tests.helpers.pocket import NEEDS_POCKET, RATE, build_tiny_model, read_wav

if TYPE_CHECKING:
    from speechgate.engines.pocket.engine import PocketEngine

pytestmark = [pytest.mark.slow, NEEDS_POCKET]

TEXT = "Hi."
# One Mimi frame: 24 kHz at 12.5 frames per second.
FRAME = 1920


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model (config.yaml, tokenizer.json, model.safetensors) and two voices."""
    return build_tiny_model(tmp_path_factory.mktemp("pocket"))


@pytest.fixture(scope="module")
def engine(model_dir: Path) -> Iterator[Engine]:
    # An EOS threshold no logit reaches: random weights would end speech at a random frame,
    # this way every output runs to the length pocket-tts allows for the text.
    config = EngineConfig(
        "pocket",
        threads=2,
        options={"config": str(model_dir / "config.yaml"), "eos_threshold": "1e9"},
    )
    engine = load_engine(config)
    yield engine
    engine.close()


def speak(engine: Engine, voice: Path | str, text: str = TEXT, speed: float = 1.0) -> np.ndarray:
    import torch

    # Sampling draws noise from torch's global generator (in pocket-tts' one generation thread).
    torch.manual_seed(0)
    chunks = list(engine.synthesize(SynthesisRequest(text=text, voice=str(voice), speed=speed)))
    return np.concatenate([chunk.samples for chunk in chunks])


def test_loads_through_the_real_loader(engine: Engine) -> None:
    import torch

    from speechgate.engines.pocket.engine import PocketEngine

    assert isinstance(engine, PocketEngine)
    assert engine.name == "pocket"
    assert engine.sample_rate == RATE
    assert not engine.supports_instructions
    # A custom model cannot use the built-in voices: they belong to the released weights.
    assert list(engine.voices()) == []
    # Importing pocket_tts pinned torch to one thread.
    assert torch.get_num_threads() == 2


def test_streams_mono_int16_frames(engine: Engine, model_dir: Path) -> None:
    request = SynthesisRequest(text=TEXT, voice=str(model_dir / "low.wav"))
    chunks: list[PcmChunk] = list(engine.synthesize(request))
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.samples.dtype == np.int16
        assert chunk.samples.ndim == 1
        assert chunk.sample_rate == RATE
        # The decoder hands over every frame generated so far: whole 80 ms frames, often more.
        assert chunk.num_samples % FRAME == 0
    samples = np.concatenate([chunk.samples for chunk in chunks])
    assert np.sqrt(np.mean(samples.astype(np.float64) ** 2)) > 100
    # With EOS out of reach the length is pocket-tts' cap for the text, (tokens / 3 + 2) s:
    # 3.68 s here (46 frames, measured).
    assert sum(chunk.num_samples for chunk in chunks) == len(samples)
    assert 2.0 < len(samples) / RATE < 15.0


def test_closing_the_stream_stops_generation(
    engine: PocketEngine, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = engine._model
    stops: list[threading.Event] = []
    steps = 0
    stream_frames = model.generate_audio_stream
    run_step = model._run_flow_lm_and_increment_step

    def recording_stream(*args: Any, stop: threading.Event, **kwargs: Any) -> Any:
        stops.append(stop)
        return stream_frames(*args, stop=stop, **kwargs)

    def gated_step(**kwargs: Any) -> Any:
        # Generation runs ahead of the consumer in its own thread: from the second frame on,
        # hold it until the stop arrives, so what it does after the close is exactly counted.
        nonlocal steps
        if "backbone_input_latents" in kwargs:
            steps += 1
            if steps >= 2:
                assert stops[0].wait(timeout=10)
        return run_step(**kwargs)

    monkeypatch.setattr(model, "generate_audio_stream", recording_stream)
    monkeypatch.setattr(model, "_run_flow_lm_and_increment_step", gated_step)
    stream = engine.synthesize(SynthesisRequest(text=TEXT, voice=str(model_dir / "low.wav")))
    first = next(iter(stream))
    assert first.num_samples == FRAME
    assert isinstance(stream, Generator)
    stream.close()

    assert stops[0].is_set()
    # The frame in flight when the stop came, then nothing: the full text takes ~60 frames.
    assert steps == 2


def difference(a: np.ndarray, b: np.ndarray) -> float:
    """RMS of the difference relative to the RMS of `a`."""
    assert len(a) == len(b)
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.sqrt(np.mean((a - b) ** 2) / np.mean(a**2)))


def test_same_voice_and_seed_repeat_different_voices_differ(
    engine: Engine, model_dir: Path
) -> None:
    low = speak(engine, model_dir / "low.wav")
    # Not bit for bit: the decoder takes a timing-dependent number of frames per call, which
    # moves the float rounding (~1e-6 of the signal here).
    jitter = difference(speak(engine, model_dir / "low.wav"), low)
    assert jitter < 1e-4
    # Random weights barely listen to the voice prompt (~1e-4 of the signal for these weights,
    # 5e-6 to 1e-4 across seeds), but it is well clear of the jitter; with the speaker
    # projection left at zeros both voices would give the same audio.
    assert difference(speak(engine, model_dir / "noise.wav"), low) > 10 * max(jitter, 1e-6)


def test_an_exported_state_speaks_like_its_wav(engine: Engine, model_dir: Path) -> None:
    from pocket_tts import TTSModel, export_model_state

    model = TTSModel.load_model(config=model_dir / "config.yaml")
    state_path = model_dir / "low.safetensors"
    export_model_state(model.get_state_for_audio_prompt(model_dir / "low.wav"), state_path)
    assert difference(speak(engine, state_path), speak(engine, model_dir / "low.wav")) < 1e-3


def test_an_existing_file_that_is_no_voice_is_an_unknown_voice(
    engine: Engine, model_dir: Path
) -> None:
    # The other unknown voices are in test_contract.py.
    voice = str(model_dir / "config.yaml")
    with pytest.raises(ValueError, match=r"unknown pocket voice .*local \.wav or \.safetensors"):
        engine.synthesize(SynthesisRequest(text=TEXT, voice=voice))


def test_builtin_voice_offline_raises_a_clear_error(
    engine: PocketEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pocket_tts.utils.config import CONFIGS_DIR

    from speechgate.engines.pocket.engine import PocketEngine

    # As if loaded from the packaged English config, with an empty cache and no hub.
    english = PocketEngine(engine._model, "english")
    monkeypatch.setattr(engine._model, "origin", CONFIGS_DIR / "english.yaml")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert "alba" in {voice.id for voice in english.voices()}
    with pytest.raises(RuntimeError, match="'alba' is not in the Hugging Face cache"):
        english.synthesize(SynthesisRequest(text=TEXT, voice="alba"))


# pocket-tts quantizes with torch.ao.quantization, which torch 2.13 still runs but deprecates.
@pytest.mark.filterwarnings("ignore:torch.ao.quantization is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings(
    "ignore:torch.quantize_per_tensor, torch.quantize_per_channel:UserWarning"
)
def test_quantized_model_speaks(model_dir: Path) -> None:
    options = {"config": str(model_dir / "config.yaml"), "quantize": "true"}
    engine = load_engine(EngineConfig("pocket", options=options))
    try:
        assert len(speak(engine, model_dir / "low.wav")) > 0
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"language": "english", "config": "x.yaml"}, "not both"),
        ({"config": "x.yaml", "quantize": "yes"}, "quantize"),
    ],
)
def test_bad_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_engine(EngineConfig("pocket", options=options))


def test_a_seed_repeats_the_output_bit_for_bit(engine: Engine, model_dir: Path) -> None:
    voice = str(model_dir / "low.wav")

    def seeded(seed: int) -> np.ndarray:
        request = SynthesisRequest(text=TEXT, voice=voice, seed=seed)
        return np.concatenate([chunk.samples for chunk in engine.synthesize(request)])

    first = seeded(7)
    assert np.array_equal(seeded(7), first)
    assert not np.array_equal(seeded(8), first)


def test_a_reference_prompt_speaks_like_its_wav(engine: Engine, model_dir: Path) -> None:
    prompt = read_wav(model_dir / "low.wav")
    by_reference = SynthesisRequest(text=TEXT, voice="", seed=1, reference=prompt)
    by_path = SynthesisRequest(text=TEXT, voice=str(model_dir / "low.wav"), seed=1)
    # Not bit for bit: pocket-tts reads a file to float its own way (~1e-5 apart).
    assert (
        difference(
            np.concatenate([c.samples for c in engine.synthesize(by_reference)]),
            np.concatenate([c.samples for c in engine.synthesize(by_path)]),
        )
        < 1e-3
    )


def test_a_cloned_state_speaks_like_its_prompt(
    engine: PocketEngine, model_dir: Path, tmp_path: Path
) -> None:
    assert engine.can_clone
    prompt = read_wav(model_dir / "noise.wav")
    state = tmp_path / "voice.safetensors"
    state.write_bytes(engine.clone(prompt))
    stored = SynthesisRequest(text=TEXT, voice=str(state), seed=3)
    direct = SynthesisRequest(text=TEXT, voice="", seed=3, reference=prompt)
    assert np.array_equal(
        np.concatenate([c.samples for c in engine.synthesize(stored)]),
        np.concatenate([c.samples for c in engine.synthesize(direct)]),
    )


def test_a_model_without_cloning_weights_refuses_to_clone(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from speechgate.engines.pocket.engine import PocketEngine

    # pocket-tts falls back to `weights_path_without_voice_cloning` when `weights_path` cannot be
    # downloaded, as the gated release cannot be without an accepted licence (nor offline).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    config = (model_dir / "random.yaml").read_text()
    (tmp_path / "config.yaml").write_text(
        f"{config}weights_path: hf://kyutai/pocket-tts/gated.safetensors\n"
        f"weights_path_without_voice_cloning: {model_dir / 'model.safetensors'}\n"
    )
    engine = load_engine(EngineConfig("pocket", options={"config": str(tmp_path / "config.yaml")}))
    try:
        assert isinstance(engine, PocketEngine)
        assert not engine.can_clone
        prompt = read_wav(model_dir / "low.wav")
        with pytest.raises(ValueError, match="no voice-cloning weights"):
            engine.clone(prompt)
        with pytest.raises(ValueError, match="no voice-cloning weights"):
            engine.synthesize(SynthesisRequest(text=TEXT, voice="", reference=prompt))
    finally:
        engine.close()


# --- installed configs (`speechgate voices pull pocket:<config>`) ---------------------------


def install_config(models: Path, model_dir: Path, config: str, voices: dict[str, str]) -> None:
    """Install the tiny model as packaged config `config`, with `voices` (name -> prompt .wav
    in `model_dir`) as embeddings, the way a pull lays it out: the YAML points at the item's
    own files."""
    from pocket_tts import TTSModel, export_model_state

    target = models / "pocket" / config
    staging = models / "pocket" / f".staging-{config}"
    (staging / "embeddings").mkdir(parents=True)
    shutil.copy(model_dir / "model.safetensors", staging / "model.safetensors")
    shutil.copy(model_dir / "tokenizer.json", staging / "tokenizer.json")
    yaml = (model_dir / "config.yaml").read_text()
    yaml = yaml.replace(str(model_dir / "model.safetensors"), str(target / "model.safetensors"))
    yaml = yaml.replace(str(model_dir / "tokenizer.json"), str(target / "tokenizer.json"))
    (staging / "config.yaml").write_text(yaml)
    model = TTSModel.load_model(config=model_dir / "config.yaml")
    for name, wav in voices.items():
        state = model.get_state_for_audio_prompt(model_dir / wav)
        export_model_state(state, staging / "embeddings" / f"{name}.safetensors")
    manifest = Manifest(
        ref=f"pocket:{config}",
        engine="pocket",
        name=config,
        files={
            "config": "config.yaml",
            "weights": "model.safetensors",
            "tokenizer": "tokenizer.json",
        },
        voices=tuple(InstalledVoice(name) for name in voices),
        size_bytes=0,
        installed_at=int(time.time()),
    )
    install(staging, models, manifest)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    models = tmp_path_factory.mktemp("models")
    install_config(models, model_dir, "german", {"juergen": "low.wav", "alba": "noise.wav"})
    install_config(models, model_dir, "french", {"estelle": "noise.wav", "alba": "low.wav"})
    return models


def engine_over(models: Path, loaded_voices: int = 4, **options: str) -> PocketEngine:
    from speechgate.engines.pocket.engine import PocketEngine

    config = EngineConfig(
        "pocket",
        options={"eos_threshold": "1e9", **options},
        models_dir=str(models),
        loaded_voices=loaded_voices,
    )
    return PocketEngine.from_config(config)


def seeded(engine: Engine, voice: str) -> np.ndarray:
    chunks = engine.synthesize(SynthesisRequest(text=TEXT, voice=voice, seed=7))
    return np.concatenate([chunk.samples for chunk in chunks])


def test_an_installed_packaged_config_loads_offline_with_its_voices(models: Path) -> None:
    # `language=german` would need the hub; installed, it loads from the item's files.
    engine = engine_over(models, language="german")
    try:
        voices = {voice.id: (voice.language, voice.gender) for voice in engine.voices()}
        # The default config's voices keep their names; another config's voice is bare where
        # unique and `<config>-<voice>` where its name is taken.
        assert voices == {
            "alba": ("de", "female"),
            "juergen": ("de", "male"),
            "estelle": ("fr", "female"),
            "french-alba": ("fr", "female"),
        }
        assert len(speak(engine, "juergen")) > 0
        assert engine.loaded_models == ["german"]
        assert len(speak(engine, "french-alba")) > 0
        assert engine.loaded_models == ["german", "french"]
        assert engine.loads == 2
    finally:
        engine.close()


def test_clashing_names_of_installed_configs_are_qualified(models: Path, model_dir: Path) -> None:
    engine = engine_over(models, config=str(model_dir / "config.yaml"))
    try:
        assert sorted(voice.id for voice in engine.voices()) == [
            "estelle",
            "french-alba",
            "german-alba",
            "juergen",
        ]
        # The qualified form works for unique names too.
        assert np.array_equal(seeded(engine, "german-juergen"), seeded(engine, "juergen"))
    finally:
        engine.close()


def test_the_lru_evicts_and_reloads_models_under_a_bound_of_one(models: Path) -> None:
    engine = engine_over(models, loaded_voices=1, language="german")
    try:
        first = seeded(engine, "juergen")
        speak(engine, "estelle")
        assert (engine.loaded_models, engine.loads) == (["french"], 2)
        # Reloaded from its files, the voice says the same thing bit for bit.
        assert np.array_equal(seeded(engine, "juergen"), first)
        assert (engine.loaded_models, engine.loads) == (["german"], 3)
    finally:
        engine.close()


def test_a_config_installed_while_the_engine_runs_is_usable_at_once(
    tmp_path: Path, model_dir: Path
) -> None:
    engine = engine_over(tmp_path, config=str(model_dir / "config.yaml"))
    try:
        with pytest.raises(ValueError, match="unknown pocket voice"):
            speak(engine, "juergen")
        install_config(tmp_path, model_dir, "german", {"juergen": "low.wav"})
        assert len(speak(engine, "juergen")) > 0
        assert [voice.id for voice in engine.voices()] == ["juergen"]
    finally:
        engine.close()


class _Watched:
    """`engine`, noting at each frame after the first whether the worker's first audio had
    already left (the gateway's end of its socket was readable) when the engine was asked
    for that frame."""

    def __init__(self, engine: Engine, gateway: Any) -> None:
        self._engine = engine
        self._gateway = gateway
        self.sent_before: list[bool] = []
        self.asked_again = threading.Event()  # the test reads the socket only after this

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        import select

        for index, chunk in enumerate(self._engine.synthesize(request)):
            if index:
                readable, _, _ = select.select([self._gateway], [], [], 0)
                self.sent_before.append(bool(readable))
                self.asked_again.set()
            yield chunk


@pytest.mark.parametrize("fmt", ["pcm", "wav"])
def test_the_first_frame_leaves_the_worker_before_the_second_is_made(
    engine: Engine, model_dir: Path, fmt: str
) -> None:
    import socket

    from speechgate.audio.formats import AudioFormat
    from speechgate.lanes import Lanes
    from speechgate.pipeline import OutputSpec
    from speechgate.workers import wire
    from speechgate.workers.messages import Chunk, Done, Job, Shutdown
    from speechgate.workers.process import _Jobs

    gateway, end = socket.socketpair()
    watched = _Watched(engine, gateway)
    lanes = Lanes(watched, (1,))  # type: ignore[arg-type]
    loop = threading.Thread(target=_Jobs(watched, end, lanes).serve, daemon=True)  # type: ignore[arg-type]
    loop.start()
    try:
        request = SynthesisRequest(TEXT, str(model_dir / "low.wav"))
        wire.send(gateway, Job(1, request, OutputSpec(AudioFormat(fmt), RATE)))
        assert watched.asked_again.wait(60)
        messages = [wire.receive(gateway)]
        while not isinstance(messages[-1], Done):
            messages.append(wire.receive(gateway))
        assert len(watched.sent_before) >= 2
        assert watched.sent_before[0]  # the first audio had gone before frame two was asked for
        # (A WAV stream's header may lead, alone or with the first audio.)
        first = next(m for m in messages if isinstance(m, Chunk) and m.audio.audio_seconds > 0)
        # Within the first Mimi frame (80 ms): it did not wait for a larger chunk.
        assert first.audio.audio_seconds <= FRAME / RATE
    finally:
        wire.send(gateway, Shutdown())
        loop.join(timeout=10)
        lanes.close()
        gateway.close()
        end.close()
