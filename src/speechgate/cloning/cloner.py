"""Voice cloning: from an uploaded clip to a stored voice, and stored voices back to engines.

A clip becomes a voice prompt here; the engine's worker turns it into a speaker state through
the admission queue, and the library keeps it. A model that cannot clone is refused with a 400,
never answered in some other voice. Uploads are decoded in threads, at most `max_decodes` at
once, only up to the engine's longest prompt plus a margin.
"""

from __future__ import annotations

import asyncio
import unicodedata
from collections.abc import Callable, Mapping

from speechgate.audio.clip import UndecodableAudio, decode_clip, trim
from speechgate.audio.pcm import PcmChunk
from speechgate.catalog import Catalog
from speechgate.cloning.library import StoredVoice, VoiceLibrary
from speechgate.engines.base import EngineInfo
from speechgate.errors import Conflict, InvalidRequest
from speechgate.workers.interface import Pool

MAX_NAME_CHARS = 64
_NOT_IN_NAMES = frozenset({"Cc", "Cs", "Zl", "Zp"})  # controls, surrogates, line separators
# Decoded past the engine's longest prompt: the prompt starts at the first loud frame, so a
# few seconds of silence before someone speaks still leave a whole prompt.
DECODE_MARGIN_SECONDS = 5.0


class CloningUnsupported(InvalidRequest):
    default_code = "cloning_unsupported"

    def __init__(self, subject: str, param: str) -> None:
        super().__init__(
            f"{subject} cannot clone voices: cloning needs pocket-tts loaded with its "
            "voice-cloning weights.",
            param=param,
        )


class VoiceCloning:
    def __init__(
        self,
        catalog: Catalog,
        pools: Mapping[str, Pool],
        library: VoiceLibrary,
        min_speech_seconds: float,
        max_decodes: int = 2,
    ) -> None:
        self._catalog = catalog
        self._pools = pools
        self.library = library
        self._min_speech = min_speech_seconds
        self._decodes = asyncio.Semaphore(max_decodes)
        self.on_delete: list[Callable[[StoredVoice], object]] = []
        """Called with each voice deleted."""

    def engine(self, model: str | None) -> EngineInfo:
        """The engine that clones for `model`, or the first loaded one that can clone."""
        if model:
            engine = self._catalog.model(model).engine
            if not engine.can_clone:
                raise CloningUnsupported(f"The model {model!r} ({engine.name})", param="model")
            return engine
        for engine in self._catalog.engines.values():
            if engine.can_clone:
                return engine
        raise CloningUnsupported("No loaded model", param="model")

    def prompt(self, data: bytes, engine: EngineInfo, param: str) -> PcmChunk:
        if not data:
            raise InvalidRequest("The audio sample is empty.", param=param, code="empty_file")
        try:
            clip = decode_clip(
                data, engine.sample_rate, engine.max_prompt_seconds + DECODE_MARGIN_SECONDS
            )
        except UndecodableAudio as error:
            raise InvalidRequest(
                f"The audio sample could not be decoded ({error}); send WAV, MP3, Ogg/Opus, "
                "FLAC, M4A or WebM audio.",
                param=param,
                code="invalid_audio",
            ) from None
        if clip.speech_seconds < self._min_speech:
            raise InvalidRequest(
                f"The audio sample holds {clip.speech_seconds:.1f} s of speech "
                f"({clip.pcm.duration:.1f} s in all); cloning needs at least "
                f"{self._min_speech:g} s of someone speaking.",
                param=param,
                code="audio_too_short",
            )
        if clip.steady:
            raise InvalidRequest(
                f"The audio sample is loud but steady (its level varies by "
                f"{clip.level_spread:.1f} dB; speech varies by 15 dB or more): a tone, a hum or "
                "noise, not someone speaking.",
                param=param,
                code="audio_not_speech",
            )
        return trim(clip.pcm, engine.max_prompt_seconds)

    async def decode(self, data: bytes, engine: EngineInfo, param: str) -> PcmChunk:
        async with self._decodes:
            return await asyncio.to_thread(self.prompt, data, engine, param)

    async def create(
        self, name: str, data: bytes, engine: EngineInfo, owner: str | None = None
    ) -> StoredVoice:
        """Clone `data` for `engine` as `owner`'s voice `name` (see `engine` for which)."""
        name = self._check_name(name)
        # Checked again when stored (two uploads may race); here, to spare the work.
        if self.library.find(name, owner) is not None:
            raise Conflict(f"A voice named {name!r} already exists.", param="name")
        prompt = await self.decode(data, engine, "audio_sample")
        state = await self._pools[engine.name].clone(prompt)
        return await asyncio.to_thread(
            self.library.add, name, engine.name, state, prompt.duration, owner
        )

    def _check_name(self, name: str) -> str:
        """`name` stripped, if a clone may take it (InvalidRequest if not)."""
        name = name.strip()
        if not 0 < len(name) <= MAX_NAME_CHARS:
            raise InvalidRequest(
                f"A voice name is 1 to {MAX_NAME_CHARS} characters.",
                param="name",
                code="invalid_voice_name",
            )
        if any(unicodedata.category(char) in _NOT_IN_NAMES for char in name):
            raise InvalidRequest(
                "A voice name cannot hold control characters or line breaks.",
                param="name",
                code="invalid_voice_name",
            )
        # Stored voices are looked up before the catalog: a clone of a built-in voice's name
        # would speak instead of it for its key, on every engine whose name it is.
        if self._catalog.means_a_voice(name):
            raise InvalidRequest(
                f"{name!r} names a built-in voice (or a kind of voice, as OpenAI's names and "
                "'male' do); choose another name for the clone.",
                param="name",
                code="voice_name_reserved",
            )
        return name

    async def delete(self, voice_id: str, owner: str | None = None) -> StoredVoice:
        voice = await asyncio.to_thread(self.library.delete, voice_id, owner)
        for listener in self.on_delete:
            listener(voice)
        return voice

    def resolve(self, engine: EngineInfo, name: str, owner: str | None = None) -> str | None:
        """The state file of `owner`'s stored voice `name` (or id) on `engine`, if any."""
        voice = self.library.find(name, owner)
        if voice is None:
            return None
        if voice.engine != engine.name:
            if name != voice.id:
                # A name is the engine's to mean: another model's clone does not shadow it.
                return None
            raise InvalidRequest(
                f"The voice {name!r} was cloned for the model {voice.engine!r}; "
                f"it cannot speak on {engine.name!r}.",
                param="voice",
                code="voice_model_mismatch",
            )
        return str(self.library.state_path(voice))
