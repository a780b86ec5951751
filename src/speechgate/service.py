"""Serving logic for a speech request, between the front ends and the worker pools.

`plan` validates everything a request can get wrong, before any work (its text is prepared
once, without the normalizer, so invalid SSML or phonemes the engine cannot speak are a 400
here rather than a failed job); `open` admits the job and waits for its first audio, so that
errors up to that point can still be a JSON response.
`plan_or_pull` is `plan` for the server: with `Settings.auto_pull` on, a voice that is known
but not installed is pulled from the hub first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass

from speechgate import __version__, tracing
from speechgate.activity import RecentRequests
from speechgate.audio.formats import parse_format
from speechgate.audio.pcm import PcmChunk
from speechgate.catalog import Catalog, normalize
from speechgate.cloning.cloner import CloningUnsupported, VoiceCloning
from speechgate.dictionaries import LOCATORS_PARAM, NAMED_NONE, Dictionaries, Named
from speechgate.engines.base import EngineInfo, SynthesisRequest
from speechgate.errors import (
    InsufficientStorage,
    InvalidRequest,
    NotPullable,
    PullFailed,
    SpeechgateError,
    VoiceNotInstalled,
    disk_full,
)
from speechgate.metrics import Metrics
from speechgate.phrase_cache import (
    PhraseCache,
    PhraseKey,
    Rendition,
    encode_cached,
    joined,
    options_key,
)
from speechgate.phrase_store import PhraseStore, digest, file_version
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.settings import Settings
from speechgate.speech_request import SpeechRequest, StreamFormat
from speechgate.text.prepare import TextOptions, check
from speechgate.text.segment import SegmentLimits, clean_text
from speechgate.timing import WordFeed
from speechgate.workers.interface import Pool

_log = logging.getLogger(__name__)
# What phrases are preloaded as: the cache keeps PCM, whatever the format of the request.
_PCM = parse_format("pcm")

Pull = Callable[[str], Awaitable[object]]
"""Installs what a pull reference names (`speechgate.hub.autopull.autopull`, bound to the
server's models directory, hub and catalog refresh)."""


async def _pull_voice(pull: Pull, voice: str, ref: str) -> None:
    """`pull(ref)`, its failures told as errors about `voice`, the voice asked for."""
    try:
        await pull(ref)
    except NotPullable as error:
        # The client named a voice, not a pull reference.
        raise NotPullable(
            f"The voice {voice!r} is not installed, and the hub has nothing to pull it from: "
            f"{error.message}",
            param="voice",
        ) from None
    except SpeechgateError:
        raise
    except Exception as error:  # assembling the files failed: the pull failed, not the request
        if disk_full(error):
            raise InsufficientStorage(f"Pulling {ref} for the voice {voice!r}") from error
        raise PullFailed(f"Pulling {ref} for the voice {voice!r} failed: {error}") from error


def _traced(step: tracing.Span, plan: SpeechPlan) -> SpeechPlan:
    if step.recording:
        step.set(
            {
                "speechgate.engine": plan.engine,
                "speechgate.voice": plan.voice_id,
                "speechgate.format": plan.output.format.value,
            }
        )
    return plan


@dataclass(frozen=True)
class SpeechPlan:
    """A validated speech request, ready to run."""

    engine: str
    engine_rate: int
    request: SynthesisRequest
    output: OutputSpec
    stream_format: StreamFormat
    instructions_ignored: bool
    reference_audio: bytes | None = None  # an audio file, decoded into a prompt by `open`
    voice_id: str = ""  # the voice resolved, as clients may name it (not a file's path)
    ssml_ignored: tuple[str, ...] = ()
    """SSML markup of the text that speechgate does not act on (`Prepared.ignored`)."""
    owner: str | None = None  # the key whose stored voice speaks (None: a built-in voice)

    @property
    def characters(self) -> int:
        return len(self.request.text)


class SpeechStream:
    """A running job that has produced its first audio; iterate `chunks()` for all of it."""

    def __init__(
        self,
        first: EncodedChunk | None,
        rest: AsyncGenerator[EncodedChunk],
        started: float,
        clock: Callable[[], float],
        on_end: Callable[[SpeechStream, bool], None],
        cache: str | None = None,
    ) -> None:
        self._first = first
        self._rest = rest
        self._started = started
        self._clock = clock
        self._on_end = on_end
        self.time_to_first_audio = clock() - started
        # The engine's part of it, timed where it runs (queueing and transport excluded).
        self.engine_time_to_first_audio = first.elapsed if first is not None else None
        self.audio_seconds = 0.0
        self.completed = False
        self.cache = cache
        """"hit" (answered from the phrase cache), "miss" (cacheable, rendered now), or None."""
        self.words = WordFeed()
        """The words first known with the bytes `chunks()` has yielded, for a plan with
        `OutputSpec.word_times` (times from the start of the audio, characters of its text)."""
        self._ended = False

    async def chunks(self) -> AsyncGenerator[bytes]:
        """Encoded bytes in order; leaving early (client gone) cancels the job."""
        async with contextlib.aclosing(self.encoded()) as encoded:
            async for chunk in encoded:
                if chunk.data:
                    yield chunk.data

    async def encoded(self) -> AsyncGenerator[EncodedChunk]:
        """`chunks()` with what the pipeline says of each (its words, with `word_times`); a
        chunk may have words but no bytes yet (an encoder's buffering)."""
        try:
            if self._first is not None:
                self.audio_seconds += self._first.audio_seconds
                self.words.add(self._first.words)
                yield self._first
            async for chunk in self._rest:
                self.audio_seconds += chunk.audio_seconds
                # Words of bytes the encoder still holds go with the next bytes it releases.
                self.words.add(chunk.words)
                yield chunk
            self.completed = True
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """End the job and report how far it got, once; also for a stream whose `chunks()`
        were never iterated (a response cut before its body started)."""
        if self._ended:
            return
        self._ended = True
        try:
            await self._rest.aclose()
        finally:
            self._on_end(self, self.completed)

    @property
    def elapsed(self) -> float:
        return self._clock() - self._started


class SpeechService:
    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        pools: Mapping[str, Pool],
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.perf_counter,
        voices: VoiceCloning | None = None,
        recent: RecentRequests | None = None,
        pull: Pull | None = None,
        dictionaries: Dictionaries | None = None,
    ) -> None:
        """`pull`: what `plan_or_pull` installs a missing voice with; None: never pull.
        `dictionaries`: the operator's lexicon and the stored pronunciation dictionaries;
        None: neither."""
        self._settings = settings
        self._catalog = catalog
        self._pools = pools
        self._metrics = metrics
        self._recent = recent
        self._clock = clock
        self._voices = voices
        self._pull = pull
        self.dictionaries = dictionaries or Dictionaries()
        phrase_cache = settings.phrase_cache
        self.phrases = PhraseCache(phrase_cache.max_bytes)
        self._store = (
            PhraseStore(settings.data_dir / "phrase-cache", phrase_cache.max_bytes)
            if phrase_cache.persist and phrase_cache.max_bytes > 0
            else None
        )

    async def named_dictionaries(self, request: SpeechRequest, owner: str | None) -> Named:
        """The pronunciation dictionaries `request` names, if `owner` (the asking key's id)
        owns them: a 404 for one that is not theirs. Cheap once cached: front ends call it
        before admission, so such a request costs nothing of the key's limits."""
        return await self.dictionaries.named(request.dictionaries, owner)

    async def plan_or_pull(self, request: SpeechRequest, owner: str | None = None) -> SpeechPlan:
        """`plan`, with the request's dictionaries found, pulling a voice that is not installed
        first when this service can pull."""
        with tracing.span(tracing.PLAN) as step:
            named = await self.named_dictionaries(request, owner)
            return _traced(step, await self._pulling(lambda: self.plan(request, owner, named)))

    async def plan_options_or_pull(
        self, request: SpeechRequest, owner: str | None = None
    ) -> SpeechPlan:
        """`plan_options` for a streaming session, found and pulled like `plan_or_pull`."""
        with tracing.span(tracing.PLAN) as step:
            named = await self.named_dictionaries(request, owner)
            plan = await self._pulling(lambda: self.plan_options(request, owner, named))
            return _traced(step, plan)

    async def _pulling(self, plan: Callable[[], SpeechPlan]) -> SpeechPlan:
        try:
            return plan()
        except VoiceNotInstalled as missing:
            if self._pull is None or missing.ref is None:
                raise
            with tracing.span(tracing.PULL, {"speechgate.ref": missing.ref}):
                await _pull_voice(self._pull, missing.voice, missing.ref)
        # Once: if the voice is still not installed (the item lacks it), the refusal stands.
        return plan()

    def plan(
        self, request: SpeechRequest, owner: str | None = None, named: Named = NAMED_NONE
    ) -> SpeechPlan:
        """Check the request against the catalog and the limits; raises InvalidRequest.
        `owner`, the asking key's id, decides which stored voices it may name (None: all);
        `named`: the request's dictionaries, found (`named_dictionaries`)."""
        limit = self._settings.text.max_input_chars
        if len(request.text) > limit:
            raise InvalidRequest(
                f"Input is {len(request.text)} characters long; the maximum is {limit}.",
                param="input",
                code="string_above_max_length",
            )
        text = clean_text(request.text)
        if not text.strip():
            raise InvalidRequest("Input must contain text to speak.", param="input")
        plan = self.plan_options(request, owner, named)
        options = plan.request.text_options
        if options is None:
            return plan
        # What the worker's preparing would refuse is a 400 now, not a job failing once the
        # answer has started.
        return dataclasses.replace(plan, ssml_ignored=check(text, options))

    def plan_options(
        self, request: SpeechRequest, owner: str | None = None, named: Named = NAMED_NONE
    ) -> SpeechPlan:
        """Resolve model, voice and output format, without checking the text: a streaming
        session plans before its text arrives."""
        if request.dictionaries and not named.lexicons:
            raise RuntimeError("a request's dictionaries are found (named_dictionaries) first")
        engine = self._catalog.model(request.model).engine
        reference = self._reference_audio(request, engine)
        # A one-off voice prompt replaces the voice, whatever it names.
        voice, voice_id = (
            ("", "")
            if reference is not None
            else self._voice(engine, request.voice, request.language, owner)
        )
        if request.seed is not None and not engine.supports_seed:
            raise InvalidRequest(
                f"The model {request.model!r} ({engine.name}) cannot repeat its output for a "
                "seed; leave `seed` out.",
                param="seed",
                code="seed_unsupported",
            )
        fmt = request.format
        try:
            rate = fmt.output_rate(request.sample_rate, self._settings.audio.default_sample_rate)
        except ValueError as error:
            raise InvalidRequest(str(error), param="sample_rate") from None
        return SpeechPlan(
            engine=engine.name,
            engine_rate=engine.sample_rate,
            request=SynthesisRequest(
                text=request.text,
                voice=voice,
                speed=request.speed,
                instructions=request.instructions,
                seed=request.seed,
                text_options=self._text_options(request, engine, voice, named),
            ),
            output=OutputSpec(
                fmt.format,
                rate,
                self._settings.audio.loudness_target_lufs,
                fmt.bit_rate,
                word_times=request.word_times,
            ),
            stream_format=request.stream_format,
            instructions_ignored=bool(request.instructions) and not engine.supports_instructions,
            reference_audio=reference,
            voice_id=voice_id,
            owner=owner if voice != voice_id else None,
        )

    def engine_for_voice(self, voice: str | None, owner: str | None = None) -> str:
        """The engine that has a voice of this name, for a front end whose protocol names no
        model (Wyoming): a stored voice of `owner`'s, an installed one, else one an engine
        knows and would pull; the default engine for none (or for a name no engine knows, whose
        refusal then names that engine's voices)."""
        catalog = self._catalog
        default = self._settings.default_engine
        default = default if default in catalog.engines else next(iter(catalog.engines))
        if not voice:
            return default
        stored = self._voices.library.find(voice, owner) if self._voices else None
        if stored is not None and stored.engine in catalog.engines:
            return stored.engine
        wanted = normalize(voice)
        for engine in catalog.engines:
            if wanted in map(normalize, catalog.voice_names(engine)):
                return engine
        # A name an engine knows without having it installed: the engine whose plan pulls it.
        for engine in [default, *(name for name in catalog.engines if name != default)]:
            try:
                catalog.voice(engine, voice)
            except VoiceNotInstalled:
                return engine
            except SpeechgateError:
                continue
        return default

    def _text_options(
        self, request: SpeechRequest, engine: EngineInfo, voice: str, named: Named
    ) -> TextOptions:
        """How the engine's text is prepared: in the request's language, else its voice's,
        with the operator's lexicon and the request's dictionaries."""
        normalize = (
            self._settings.text.normalization
            if request.normalization == "auto"
            else request.normalization == "on"
        )
        language = request.language or self._catalog.language(engine.name, voice) or "en"
        return TextOptions(
            normalize=normalize,
            ssml=request.ssml,
            language=language,
            lexicon=self.dictionaries.lexicon(named, engine.phonemes),
            phonemes=engine.phonemes,
            engine=engine.name,
            lexicon_param=LOCATORS_PARAM if named.lexicons else None,
        )

    def _voice(
        self, engine: EngineInfo, name: str, language: str | None, owner: str | None
    ) -> tuple[str, str]:
        """The engine's voice id, or the state file of a voice of `owner`'s in the library; and
        the id to tell the client."""
        stored = self._voices.resolve(engine, name, owner) if self._voices else None
        if stored:
            # A cloned voice's language is unknown: `language` cannot be checked against it.
            found = self._voices.library.find(name, owner) if self._voices else None
            return stored, found.id if found else name
        voice = self._catalog.voice(engine.name, name, language)
        return voice, voice

    def _reference_audio(self, request: SpeechRequest, engine: EngineInfo) -> bytes | None:
        if request.reference_audio is not None and (self._voices is None or not engine.can_clone):
            raise CloningUnsupported(
                f"The model {request.model!r} ({engine.name})", param="reference_audio"
            )
        return request.reference_audio

    def pool(self, engine: str) -> Pool:
        return self._pools[engine]

    async def prepare(self, plan: SpeechPlan) -> SynthesisRequest:
        """The request for the engine: with its one-off voice prompt decoded, if it has one
        (a 400 if that is not usable audio)."""
        if plan.reference_audio is None or self._voices is None:
            return plan.request
        engine = self._catalog.engines[plan.engine]
        prompt = await self._voices.decode(plan.reference_audio, engine, "reference_audio")
        return dataclasses.replace(plan.request, reference=prompt)

    async def open(
        self, plan: SpeechPlan, sender: Hashable | None = None, principal: Hashable = None
    ) -> SpeechStream:
        """Admit the job and wait for its first audio (or its first error). `sender` (the
        key and address it comes from) with the plan tells a retry of a refused request from
        a new one: refused, it may keep a place for its retry. `principal`: whom admission
        shares the workers fairly between (a key; an unauthenticated client's address); all
        callers that name none are one principal."""
        started = self._clock()
        key = self.phrase_key(plan)
        if key is not None:
            hit = self._cached(key, plan.output)
            if self._metrics is not None:
                outcome = "miss" if hit is None else "hit"
                self._metrics.phrase_cache.labels(plan.engine, outcome).inc()
            if hit is not None:
                return await self._stream(plan, hit, started, "hit")
        # The plan's hash, not the plan: a kept place must not keep a long text alive.
        retry_key = None if sender is None else (sender, hash(plan))
        output = plan.output if key is None else dataclasses.replace(plan.output, keep_pcm=True)
        chunks = self._pools[plan.engine].synthesize(
            await self.prepare(plan), output, retry_key, principal
        )
        if key is not None:
            chunks = self._keeping(key, plan.output, chunks, plan.engine_rate)
        return await self._stream(plan, chunks, started, None if key is None else "miss")

    async def _stream(
        self,
        plan: SpeechPlan,
        chunks: AsyncGenerator[EncodedChunk],
        started: float,
        cache: str | None,
    ) -> SpeechStream:
        try:
            first: EncodedChunk | None = await anext(chunks)
        except StopAsyncIteration:
            first = None
        except BaseException:
            await chunks.aclose()
            raise
        return SpeechStream(
            first,
            chunks,
            started,
            self._clock,
            lambda stream, ok: self._observe(plan, stream, ok),
            cache,
        )

    def phrase_key(self, plan: SpeechPlan) -> PhraseKey | None:
        """What `plan`'s audio is cached under; None if it is not cached: no cache, a one-off
        voice prompt, word times asked for, or an engine that samples randomly without a seed
        (unless `phrase_cache.random`)."""
        if self.phrases.max_bytes <= 0 or plan.reference_audio is not None:
            return None
        if plan.output.word_times:
            return None
        engine = self._catalog.engines.get(plan.engine)
        random = engine is not None and engine.samples_randomly and plan.request.seed is None
        if random and not self._settings.phrase_cache.random:
            return None
        request = plan.request
        key = PhraseKey(
            engine=plan.engine,
            voice=request.voice,
            voice_id=plan.voice_id,
            owner=plan.owner,
            text=request.text,
            speed=request.speed,
            seed=request.seed,
            instructions=request.instructions,
            loudness_target=plan.output.loudness_target,
            engine_options=options_key(self._settings.engine_options.get(plan.engine)),
            text_options=request.text_options,
        )
        try:
            hash(key)
        except TypeError:  # text options holding something unhashable: not worth a cache
            return None
        return key

    def _cached(self, key: PhraseKey, output: OutputSpec) -> AsyncGenerator[EncodedChunk] | None:
        """A hit's chunks, with no worker and no queue: the bytes kept from an earlier hit in
        this output, else the PCM encoded here (a short first chunk first), its bytes then kept
        for the next; None on a miss."""
        rendition = self.phrases.rendition(key, output)
        if rendition is not None:
            return rendition.replay()
        pcm = self.phrases.get(key)
        if pcm is None:
            pcm = self._take_stored(key)
        if pcm is None:
            return None
        return self._keeping_rendition(key, output, encode_cached(pcm, output))

    async def _keeping_rendition(
        self, key: PhraseKey, output: OutputSpec, chunks: AsyncGenerator[EncodedChunk]
    ) -> AsyncGenerator[EncodedChunk]:
        """`chunks`, their bytes kept as `key`'s rendition for `output` once the last has
        come (not if cut short)."""
        encoded: list[EncodedChunk] = []
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                encoded.append(chunk)
                yield chunk
        self.phrases.put_rendition(key, output, Rendition.of(encoded))

    async def _keeping(
        self,
        key: PhraseKey,
        output: OutputSpec,
        chunks: AsyncGenerator[EncodedChunk],
        sample_rate: int,
    ) -> AsyncGenerator[EncodedChunk]:
        """`chunks`, their PCM kept in the cache once the last has come (not if cut short),
        and their bytes as its rendition for `output`: a repeat in the same format, the
        usual case, runs no encoder either."""
        pieces: list[bytes] = []
        encoded: list[EncodedChunk] = []
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                pieces.append(chunk.pcm)
                chunk = dataclasses.replace(chunk, pcm=b"")
                encoded.append(chunk)
                yield chunk
        if await self._keep(key, joined(pieces, sample_rate)):
            self.phrases.put_rendition(key, output, Rendition.of(encoded))

    async def _keep(self, key: PhraseKey, pcm: PcmChunk, pinned: bool = False) -> bool:
        """`pcm` put in the cache for `key`, and on disk if the cache persists."""
        kept = self.phrases.put(key, pcm, pinned)
        if kept and self._store is not None:
            await asyncio.to_thread(self._store.save, self._digest(key), pcm, key.voice_id)
        return kept

    async def load_phrases(self) -> int:
        """Read the phrases kept on disk into the cache (`Settings.phrase_cache.persist`);
        returns how many."""
        if self._store is None:
            return 0
        stored = await asyncio.to_thread(self._store.load)
        # The newest last: the least recently used in the cache are the oldest on disk.
        return sum(self.phrases.put_stored(entry.digest, entry.pcm) for entry in stored[::-1])

    def _take_stored(self, key: PhraseKey) -> PcmChunk | None:
        if not self.phrases.stored:  # nothing read from disk waits: no digest to work out
            return None
        return self.phrases.take_stored(self._digest(key), key)

    def _digest(self, key: PhraseKey) -> str:
        """`key`'s name on disk, with the version of its voice's files: a stored voice's
        state, the engine's installed items, and speechgate's own (its pipeline)."""
        marks = self._catalog.installed_marks(key.engine)
        # A stored voice is spoken with its state file; a built-in one is named.
        state = file_version(key.voice) if key.voice != key.voice_id else ""
        return digest(key, f"{__version__}|{state}|{marks}")

    def forget_voice(self, voice_id: str) -> int:
        """Drop the phrases spoken with `voice_id` (a stored voice deleted), from memory and
        disk; returns how many were in memory."""
        if self._store is not None:
            self._store.forget_voice(voice_id)
        return self.phrases.forget_voice(voice_id)

    async def preload(self, phrases: list[str], voices: list[str], model: str) -> int:
        """Render `phrases` in each of `voices` with `model` into the cache, pinned; returns
        how many were kept. A phrase that cannot be spoken (bad voice) is skipped."""
        kept = 0
        for voice in voices:
            for text in phrases:
                request = SpeechRequest(model=model, voice=voice, format=_PCM, text=text)
                try:
                    plan = self.plan(request)
                    key = self.phrase_key(plan)
                    if key is None:
                        continue
                    stored = self._take_stored(key)
                    if stored is not None:  # rendered before the server last stopped
                        kept += self.phrases.put(key, stored, pinned=True)
                        continue
                    output = dataclasses.replace(plan.output, keep_pcm=True)
                    pieces = [
                        chunk.pcm
                        async for chunk in self._pools[plan.engine].synthesize(plan.request, output)
                    ]
                except SpeechgateError as error:
                    _log.warning("phrase %r in voice %r not preloaded: %s", text, voice, error)
                    continue
                kept += await self._keep(key, joined(pieces, plan.engine_rate), pinned=True)
        return kept

    def segment_limits(self, engine: str) -> SegmentLimits:
        """Where text streamed to `engine` is cut (see `SegmentLimits.for_speed`): by the
        characters per second its pool has measured, its estimate before; the fixed limits
        for an engine that is not `Paced`."""
        info = self._catalog.engines.get(engine)
        if info is None or info.characters_per_second is None:
            return SegmentLimits()
        times = self._pools[engine].service_times
        measured = times.rate if times.real_time_factor is not None else None
        return SegmentLimits.for_speed(measured or info.characters_per_second)

    def real_time_factor(self, engine: str) -> float | None:
        """The engine's recent seconds of audio per second of synthesis."""
        return self._pools[engine].service_times.real_time_factor

    def _observe(self, plan: SpeechPlan, stream: SpeechStream, completed: bool) -> None:
        if self._metrics is not None:
            self._metrics.record_speech(
                plan.engine,
                plan.characters,
                stream.time_to_first_audio,
                stream.elapsed,
                stream.audio_seconds,
                completed,
            )
        if self._recent is not None:
            self._recent.record(
                stream.time_to_first_audio,
                stream.elapsed,
                stream.audio_seconds,
                completed,
            )
