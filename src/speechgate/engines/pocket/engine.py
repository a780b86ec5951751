"""Kyutai's pocket-tts (a streaming flow language model and the Mimi codec, on torch).

The default model loads at start: a config packaged with pocket-tts (option `language`), from
its installed item or else the Hugging Face cache, or a local YAML (option `config`), which
cannot use the built-in voices (states precomputed with the released weights). Other installed
configs load on first use into an LRU bounded by `EngineConfig.loaded_voices`.

A voice of an installed config keeps its bare name unless it clashes, then `<config>-<voice>`.
A voice may also be a local `.wav` to clone or an exported `.safetensors` state, spoken with the
default model. A model without the (gated) cloning weights refuses to clone rather than speak
in some other voice.
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from pocket_tts import TTSModel, export_model_state

# Private, but the one list of the built-in voice names pocket-tts accepts.
from pocket_tts.utils.utils import _ORIGINS_OF_PREDEFINED_VOICES

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.stretch import stretch
from speechgate.engines.base import EngineConfig, SynthesisRequest, Voice
from speechgate.engines.pocket import POCKET_GENDERS, pocket_config_language
from speechgate.voices.installed import InstalledItem, installed

DEFAULT_LANGUAGE = "english"
# What `get_state_for_audio_prompt` reads without soundfile.
_VOICE_FILE_SUFFIXES = (".wav", ".safetensors")
# A voice state is a KV cache of the voice prompt.
_STATE_CACHE_SIZE = 16
# pocket-tts' own cap on a voice prompt (`get_state_for_audio_prompt(truncate=True)`).
_MAX_PROMPT_SECONDS = 30.0


def _flag(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(f"pocket option quantize must be 'true' or 'false', not {value!r}")
    return value.lower() == "true"


@dataclass(frozen=True)
class ModelSpec:
    """A model the engine can load: a packaged config (`language`) or a local YAML, with its
    voices."""

    name: str
    language: str | None = None
    yaml: Path | None = None
    voices: Mapping[str, Path | None] = field(default_factory=dict)
    """Voice name -> its state file (None: a built-in name pocket-tts fetches itself)."""

    @classmethod
    def installed(cls, item: InstalledItem) -> ModelSpec:
        embeddings = item.directory / "embeddings"
        voices = {
            path.stem: path for path in sorted(embeddings.glob("*.safetensors")) if path.is_file()
        }
        return cls(item.directory.name, yaml=item.file("config"), voices=voices)


Loader = Callable[[ModelSpec], TTSModel]


class PocketEngine:
    """pocket-tts models: a default one and the installed configs. Not thread-safe: one per
    worker process."""

    name = "pocket"
    supports_instructions = False
    supports_seed = True
    samples_randomly = True
    blends_voices = False
    # Its model has no phoneme input.
    phonemes = False
    max_prompt_seconds = _MAX_PROMPT_SECONDS

    def __init__(
        self,
        model: TTSModel,
        language: str | None,
        *,
        default: ModelSpec | None = None,
        loader: Loader | None = None,
        models_dir: Path | None = None,
        loaded_voices: int = 4,
    ) -> None:
        builtin: dict[str, Path | None] = dict.fromkeys(
            sorted(_ORIGINS_OF_PREDEFINED_VOICES) if language else []
        )
        self._default = default or ModelSpec(language or "custom", language, voices=builtin)
        self._loader = loader
        self._models_dir = models_dir
        self._bound = max(1, loaded_voices)
        self._models: OrderedDict[str, TTSModel] = OrderedDict({self._default.name: model})
        self.loads = 1
        """How many times a model was loaded, the default included."""
        self._states: OrderedDict[tuple[str, str, int], Any] = OrderedDict()
        self._specs: dict[str, ModelSpec] = {}
        self._ids: dict[str, tuple[str, str]] = {}
        self._voices: list[Voice] = []
        self._rescan()

    @classmethod
    def from_config(cls, config: EngineConfig) -> PocketEngine:
        options = config.options
        language, yaml_path = options.get("language"), options.get("config")
        if language and yaml_path:
            raise ValueError("pocket takes the `language` option or `config`, not both")
        if not yaml_path:
            language = language or DEFAULT_LANGUAGE
        eos = options.get("eos_threshold")
        quantize = _flag(options.get("quantize", "false"))
        models_dir = Path(config.models_dir) if config.models_dir else None

        def load(spec: ModelSpec) -> TTSModel:
            return TTSModel.load_model(
                language=spec.language,
                config=spec.yaml,
                eos_threshold=float(eos) if eos else None,
                quantize=quantize,
            )

        if yaml_path:
            default = ModelSpec("custom", yaml=Path(yaml_path))
        else:
            assert language is not None
            item = _installed_item(models_dir, language)
            default = (
                ModelSpec.installed(item)
                if item
                else ModelSpec(
                    language,
                    language,
                    voices=dict.fromkeys(sorted(_ORIGINS_OF_PREDEFINED_VOICES)),
                )
            )
        model = load(default)
        # Importing pocket_tts pins torch to one thread; a worker may have more cores.
        torch.set_num_threads(config.threads)
        return cls(
            model,
            language,
            default=default,
            loader=load,
            models_dir=models_dir,
            loaded_voices=config.loaded_voices,
        )

    @property
    def _model(self) -> TTSModel:
        return self._load(self._default)

    @property
    def sample_rate(self) -> int:
        return int(self._models[next(iter(self._models))].sample_rate)

    def voices(self) -> Sequence[Voice]:
        return self._voices

    @property
    def loaded_models(self) -> list[str]:
        return list(self._models)

    @property
    def can_clone(self) -> bool:
        return bool(self._model.has_voice_cloning)

    def clone(self, prompt: PcmChunk) -> bytes:
        """The voice state of `prompt`, as `export_model_state`'s safetensors bytes."""
        state = self._prompt_state(prompt)
        with tempfile.TemporaryDirectory(prefix="speechgate-pocket-") as directory:
            path = Path(directory) / "voice.safetensors"
            export_model_state(state, path)
            return path.read_bytes()

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        """Say `request.text`, streaming frames as made; a bad voice raises at the call."""
        if request.reference is not None:
            key = hashlib.blake2b(request.reference.samples.tobytes(), digest_size=16)
            reference = request.reference
            model = self._model
            state = self._cached(
                (self._default.name, f"prompt:{key.hexdigest()}", 0),
                lambda: self._prompt_state(reference),
            )
        else:
            model, state = self._state(request.voice)
        frames = self._speak(model, request.text, state, request.seed)
        # pocket-tts has no speed control of its own.
        return stretch(frames, self.sample_rate, request.speed)

    def _speak(
        self, model: TTSModel, text: str, state: Any, seed: int | None
    ) -> Generator[PcmChunk]:
        # pocket-tts raises on text with nothing to say.
        if not text.strip():
            return
        stop = threading.Event()
        batching = model.max_decoder_frames_per_call
        if seed is not None:
            # Sampling draws from torch's global generator.
            torch.manual_seed(seed)
            # Frames per decoder call otherwise follow thread timing, which moves the float
            # rounding: one per call makes a seeded output repeat bit for bit.
            model.max_decoder_frames_per_call = 1
        # How pocket-tts' generation threads learn that the consumer left.
        else:
            # The first frame is decoded alone, so the first audio leaves as soon as it exists.
            model.max_decoder_frames_per_call = 1
        frames = model.generate_audio_stream(state, text, stop=stop)
        try:
            for index, frame in enumerate(frames):
                if index == 0 and seed is None:
                    model.max_decoder_frames_per_call = batching
                yield PcmChunk.from_float(frame.numpy(), self.sample_rate)
        finally:
            stop.set()
            # Drain rather than close, so none of this job's threads still uses the model in
            # the next job.
            for _ in frames:
                pass
            model.max_decoder_frames_per_call = batching

    def _prompt_state(self, prompt: PcmChunk) -> Any:
        if not self.can_clone:
            # pocket-tts checks this for files only; a tensor prompt on weights without
            # cloning would speak in no particular voice.
            raise ValueError("this pocket-tts model has no voice-cloning weights")
        if prompt.sample_rate != self.sample_rate:
            raise ValueError(f"voice prompt at {prompt.sample_rate} Hz, not {self.sample_rate}")
        audio = torch.from_numpy(prompt.samples.astype("float32") / 32768.0)
        return self._model.get_state_for_audio_prompt(audio.unsqueeze(0))

    def _state(self, voice: str) -> tuple[TTSModel, Any]:
        """The model and its state for `voice`, computed once."""
        if voice not in self._ids and not _is_voice_file(voice):
            # Pulled since the last look? Manifests are cheap to read.
            self._rescan()
        if voice in self._ids:
            config, name = self._ids[voice]
            spec = self._specs[config]
            model = self._load(spec)
            path = spec.voices[name]
            if path is None:
                return model, self._cached((config, name, 0), lambda: _builtin_state(model, name))
            return model, self._cached(
                (config, name, path.stat().st_mtime_ns),
                lambda: model.get_state_for_audio_prompt(path),
            )
        if not _is_voice_file(voice):
            raise ValueError(
                f"unknown pocket voice {voice!r}: not a voice of this engine "
                f"({len(self._voices)} of them) nor a local .wav or .safetensors file"
            )
        path = Path(voice).resolve()
        model = self._model
        # The modification time in the key rereads a file replaced in place.
        return model, self._cached(
            (self._default.name, str(path), path.stat().st_mtime_ns),
            lambda: model.get_state_for_audio_prompt(path),
        )

    def _load(self, spec: ModelSpec) -> TTSModel:
        model = self._models.get(spec.name)
        if model is not None:
            self._models.move_to_end(spec.name)
            return model
        if self._loader is None:
            raise RuntimeError(f"pocket model {spec.name!r} cannot be loaded by this engine")
        model = self._models[spec.name] = self._loader(spec)
        self.loads += 1
        while len(self._models) > self._bound:
            evicted, _ = self._models.popitem(last=False)
            for key in [key for key in self._states if key[0] == evicted]:
                del self._states[key]
        return model

    def _rescan(self) -> None:
        specs = {self._default.name: self._default}
        if self._models_dir is not None:
            for item in installed(self._models_dir, "pocket"):
                if item.directory.name != self._default.name:
                    specs[item.directory.name] = ModelSpec.installed(item)
        ids: dict[str, tuple[str, str]] = {
            name: (self._default.name, name) for name in self._default.voices
        }
        others = [(spec.name, name) for spec in specs.values() for name in spec.voices]
        others = [(config, name) for config, name in others if config != self._default.name]
        counts: dict[str, int] = {}
        for _, name in others:
            counts[name] = counts.get(name, 0) + 1
        for config, name in others:
            bare = name not in ids and counts[name] == 1
            ids[name if bare else f"{config}-{name}"] = (config, name)
        listed = dict(ids)
        for config, name in others:
            ids.setdefault(f"{config}-{name}", (config, name))
        self._specs, self._ids = specs, ids
        self._voices = [
            Voice(
                voice_id,
                voice_id,
                language=pocket_config_language(config),
                gender=POCKET_GENDERS.get(name),
            )
            for voice_id, (config, name) in listed.items()
        ]

    def _cached(self, key: tuple[str, str, int], compute: Callable[[], Any]) -> Any:
        if key in self._states:
            self._states.move_to_end(key)
            return self._states[key]
        state = self._states[key] = compute()
        if len(self._states) > _STATE_CACHE_SIZE:
            self._states.popitem(last=False)
        return state

    def close(self) -> None:
        self._states.clear()
        self._models.clear()


def _is_voice_file(voice: str) -> bool:
    path = Path(voice)
    return path.suffix.lower() in _VOICE_FILE_SUFFIXES and path.is_file()


def _installed_item(models_dir: Path | None, name: str) -> InstalledItem | None:
    if models_dir is None:
        return None
    return next((i for i in installed(models_dir, "pocket") if i.directory.name == name), None)


def _builtin_state(model: TTSModel, voice: str) -> Any:
    try:
        return model.get_state_for_audio_prompt(voice)
    except OSError as error:
        # huggingface_hub raises OSError subclasses when the hub is unreachable and the
        # cache lacks a built-in voice.
        raise RuntimeError(
            f"pocket voice {voice!r} is not in the Hugging Face cache and the hub is "
            f"unreachable: download it once, or clone a local .wav instead ({error})"
        ) from error
