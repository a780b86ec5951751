"""Kyutai's pocket-tts (a streaming flow language model and the Mimi codec, on torch).

Two ways to load a model, both through pocket-tts' own loader, `TTSModel.load_model`:

- option `language` (default "english"): one of the configs packaged with pocket-tts. Their
  weights, tokenizer and built-in voices are `hf://` entries pinned to a revision, so they load
  offline from a Hugging Face cache that already holds them (`$HF_HOME/hub`); with an empty
  cache the load needs the hub (and the voice-cloning weights are gated).
- option `config`: a local YAML file in pocket-tts' own schema, e.g. a fine-tuned model. Such
  weights cannot use the built-in voices (they are states precomputed with the released
  weights), so that engine lists none.

Either way a voice may also be a path to a local `.wav` to clone, or to a `.safetensors` state
exported with `pocket_tts.export_model_state` (what `clone` returns, and what speechgate's voice
library stores), or a request may carry its own voice prompt (`SynthesisRequest.reference`).
Cloning needs the weights with voice cloning: a model loaded without them (pocket-tts falls
back to those when the gated ones cannot be had) refuses to clone instead of speaking in some
other voice.

Other options: `quantize` ("true": dynamic int8 on the language model, ~1.5x faster) and
`eos_threshold` (default: the config's; a very high value never ends speech early).
"""

from __future__ import annotations

import hashlib
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from pocket_tts import TTSModel, export_model_state

# Private, but it is the one list of the built-in voice names pocket-tts accepts.
from pocket_tts.utils.utils import _ORIGINS_OF_PREDEFINED_VOICES

from speechgate.audio.pcm import PcmChunk
from speechgate.audio.stretch import stretch
from speechgate.engines.base import EngineConfig, SynthesisRequest, Voice

DEFAULT_LANGUAGE = "english"
# What `get_state_for_audio_prompt` reads without optional dependencies (others need soundfile).
_VOICE_FILE_SUFFIXES = (".wav", ".safetensors")
# A voice state is a KV cache of the voice prompt: ~1-10 MB each for the shipped models.
_STATE_CACHE_SIZE = 16
# pocket-tts' own cap on a voice prompt (`get_state_for_audio_prompt(truncate=True)`).
_MAX_PROMPT_SECONDS = 30.0


def _flag(value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise ValueError(f"pocket option quantize must be 'true' or 'false', not {value!r}")
    return value.lower() == "true"


class PocketEngine:
    """One pocket-tts model. Not thread-safe (neither is pocket-tts): one per worker process."""

    name = "pocket"
    supports_instructions = False
    supports_seed = True
    blends_voices = False
    max_prompt_seconds = _MAX_PROMPT_SECONDS

    def __init__(self, model: TTSModel, language: str | None) -> None:
        self._model = model
        # Built-in voices only exist for the packaged configs (they need the released weights).
        builtin = sorted(_ORIGINS_OF_PREDEFINED_VOICES) if language else []
        self._voices = [Voice(id=voice, name=voice, language=language) for voice in builtin]
        self._builtin = set(builtin)
        self._states: OrderedDict[tuple[str, int], Any] = OrderedDict()

    @classmethod
    def from_config(cls, config: EngineConfig) -> PocketEngine:
        """Options: `language` or `config` (not both), `quantize`, `eos_threshold`."""
        options = config.options
        language, yaml_path = options.get("language"), options.get("config")
        if language and yaml_path:
            raise ValueError("pocket takes the `language` option or `config`, not both")
        if not yaml_path:
            language = language or DEFAULT_LANGUAGE
        eos = options.get("eos_threshold")
        model = TTSModel.load_model(
            language=language,
            config=Path(yaml_path) if yaml_path else None,
            eos_threshold=float(eos) if eos else None,
            quantize=_flag(options.get("quantize", "false")),
        )
        # Importing pocket_tts pins torch to one thread; a worker may have more cores.
        torch.set_num_threads(config.threads)
        return cls(model, language)

    @property
    def sample_rate(self) -> int:
        return int(self._model.sample_rate)

    def voices(self) -> Sequence[Voice]:
        return self._voices

    @property
    def can_clone(self) -> bool:
        return bool(self._model.has_voice_cloning)

    def clone(self, prompt: PcmChunk) -> bytes:
        """The voice state of `prompt`, as the safetensors bytes `export_model_state` writes."""
        state = self._prompt_state(prompt)
        with tempfile.TemporaryDirectory(prefix="speechgate-pocket-") as directory:
            path = Path(directory) / "voice.safetensors"
            export_model_state(state, path)
            return path.read_bytes()

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        """Say `request.text`, streaming ~80 ms frames as the model makes them.

        The voice is resolved here, before any audio, so a bad one raises at the call.
        """
        if request.reference is not None:
            key = hashlib.blake2b(request.reference.samples.tobytes(), digest_size=16)
            reference = request.reference
            state = self._cached(
                (f"prompt:{key.hexdigest()}", 0), lambda: self._prompt_state(reference)
            )
        else:
            state = self._state(request.voice)
        frames = self._speak(request.text, state, request.seed)
        # pocket-tts has no speed control of its own: a pitch-preserving time stretch keeps
        # OpenAI's "2.0 = half the duration".
        return stretch(frames, self.sample_rate, request.speed)

    def _speak(self, text: str, state: Any, seed: int | None) -> Generator[PcmChunk]:
        # pocket-tts raises on text with nothing to say.
        if not text.strip():
            return
        stop = threading.Event()
        batching = self._model.max_decoder_frames_per_call
        if seed is not None:
            # Sampling draws from torch's global generator, in pocket-tts' one generation thread.
            torch.manual_seed(seed)
            # The decoder otherwise takes as many frames per call as are ready, a number that
            # depends on thread timing and moves the float rounding: one frame per call is
            # what makes a seeded output repeat bit for bit.
            self._model.max_decoder_frames_per_call = 1
        # Generation runs in pocket-tts' own threads, ahead of this generator; the event is how
        # they learn that the consumer left (closing this generator lands in `finally`).
        frames = self._model.generate_audio_stream(state, text, stop=stop)
        try:
            for frame in frames:
                yield PcmChunk.from_float(frame.numpy(), self.sample_rate)
        finally:
            stop.set()
            # Drain rather than close: the threads stop at their next frame and the stream
            # then ends, so none of this job's threads still uses the model in the next job.
            for _ in frames:
                pass
            self._model.max_decoder_frames_per_call = batching

    def _prompt_state(self, prompt: PcmChunk) -> Any:
        if not self.can_clone:
            # pocket-tts checks this for files only; a tensor prompt would run on weights that
            # ignore it, and speak in no particular voice.
            raise ValueError("this pocket-tts model has no voice-cloning weights")
        if prompt.sample_rate != self.sample_rate:
            raise ValueError(f"voice prompt at {prompt.sample_rate} Hz, not {self.sample_rate}")
        audio = torch.from_numpy(prompt.samples.astype("float32") / 32768.0)
        return self._model.get_state_for_audio_prompt(audio.unsqueeze(0))

    def _state(self, voice: str) -> Any:
        """The model state for `voice`, computed once (a .wav costs a pass of the codec)."""
        if voice in self._builtin:
            return self._cached((voice, 0), lambda: self._builtin_state(voice))
        path = Path(voice)
        if path.suffix.lower() not in _VOICE_FILE_SUFFIXES or not path.is_file():
            raise ValueError(
                f"unknown pocket voice {voice!r}: not a built-in voice of this model "
                f"({len(self._builtin)} of them) nor a local .wav or .safetensors file"
            )
        path = path.resolve()
        # The modification time is part of the key, so a file replaced in place is read again.
        return self._cached(
            (str(path), path.stat().st_mtime_ns),
            lambda: self._model.get_state_for_audio_prompt(path),
        )

    def _builtin_state(self, voice: str) -> Any:
        try:
            return self._model.get_state_for_audio_prompt(voice)
        except OSError as error:
            # Built-in voices come from the Hugging Face hub on first use; huggingface_hub raises
            # OSError subclasses when the hub is unreachable and the cache lacks the file.
            raise RuntimeError(
                f"pocket voice {voice!r} is not in the Hugging Face cache and the hub is "
                f"unreachable: download it once, or clone a local .wav instead ({error})"
            ) from error

    def _cached(self, key: tuple[str, int], compute: Callable[[], Any]) -> Any:
        if key in self._states:
            self._states.move_to_end(key)
            return self._states[key]
        state = self._states[key] = compute()
        if len(self._states) > _STATE_CACHE_SIZE:
            self._states.popitem(last=False)
        return state

    def close(self) -> None:
        self._states.clear()
        del self._model
