"""The contract every synthesis engine implements.

Engines know nothing about HTTP, audio formats, keys or processes: they turn one
`SynthesisRequest` into PCM, chunk by chunk, in the thread that calls them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from speechgate.audio.pcm import PcmChunk
from speechgate.text.prepare import TextOptions
from speechgate.timing import TimedChunk


@dataclass(frozen=True)
class Voice:
    """A voice an engine can speak with.

    `language` is a BCP 47 tag where known ("en-US", "ja"); `quality` Piper's x_low/low/
    medium/high; `gender` "female" or "male" where the voice's source says so.
    """

    id: str
    name: str
    language: str | None = None
    quality: str | None = None
    gender: str | None = None


@dataclass(frozen=True)
class SynthesisRequest:
    """What an engine is asked to say. `voice` is already resolved to one of the engine's ids.

    `reference`, for an engine that clones, is a one-off voice prompt that replaces `voice`.
    `seed`, for an engine that `supports_seed`, makes the output repeatable: the same seed,
    text and voice give the same PCM. `text` may hold phoneme blocks only for an engine that
    speaks them (`Engine.phonemes`).
    """

    text: str
    voice: str
    speed: float = 1.0
    instructions: str | None = None
    seed: int | None = None
    reference: PcmChunk | None = None
    text_options: TextOptions | None = None
    """How the pipeline reads `text` before any engine sees it (`speechgate.text.prepare`):
    None, as it is. Engines are given each prepared segment with this cleared."""


@dataclass(frozen=True)
class EngineConfig:
    """How to build an engine; picklable, so a worker process can build its own copy.

    `threads` is the number of compute threads the engine uses (its worker's own cores), and
    `max_threads` the most a job may be given when it runs alone on the machine (every core the
    pool has): an `Elastic` engine prepares for both widths at load.
    `options` carries engine-specific settings such as a model path. `data_dir` is where an
    engine may keep files it derives (an assembled model, say); None: a temporary place of
    the library's choosing. `models_dir` is where pulled voices and models are installed
    (`speechgate.voices.installed`'s layout, read by the engine when it meets a voice it has not
    loaded); `loaded_voices` bounds how many voice models it keeps loaded at once.
    """

    name: str
    threads: int = 1
    max_threads: int = 0  # 0: the same as `threads`
    options: Mapping[str, str] = field(default_factory=dict)
    data_dir: str | None = None
    models_dir: str | None = None
    loaded_voices: int = 4

    @property
    def widths(self) -> tuple[int, ...]:
        """The thread counts a job may be given: `threads`, and `max_threads` if more."""
        return tuple(sorted({self.threads, max(self.threads, self.max_threads)}))


@runtime_checkable
class Engine(Protocol):
    """A loaded text-to-speech engine.

    Not thread-safe unless an implementation says otherwise: speechgate gives every engine
    instance to one worker, which runs one job at a time.
    """

    @property
    def name(self) -> str:
        """The engine id, also the model id clients may ask for (e.g. "piper")."""
        ...

    @property
    def sample_rate(self) -> int:
        """Rate of every chunk `synthesize` yields."""
        ...

    @property
    def supports_instructions(self) -> bool:
        """Whether `SynthesisRequest.instructions` changes the output."""
        ...

    @property
    def supports_seed(self) -> bool:
        """Whether `SynthesisRequest.seed` makes the output repeatable."""
        ...

    @property
    def blends_voices(self) -> bool:
        """Whether `SynthesisRequest.voice` may be a blend of its voices (see `blend`)."""
        ...

    @property
    def phonemes(self) -> bool:
        """Whether phoneme blocks in `SynthesisRequest.text` ("[[ həloʊ ]]": IPA, see
        `speechgate.text.phonemes`) are spoken as those phonemes. An engine without would
        read the block's symbols as text: it must not be given any."""
        ...

    def voices(self) -> Sequence[Voice]:
        """The voices this engine can speak with."""
        ...

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        """Yield PCM as it is produced. Stopping iteration early abandons the job."""
        ...

    def close(self) -> None:
        """Release the engine's resources."""
        ...


@runtime_checkable
class VoiceCloner(Protocol):
    """An engine that can speak in a voice it is shown: a few seconds of someone speaking."""

    @property
    def can_clone(self) -> bool:
        """Whether this model has the weights that cloning needs (some releases do not)."""
        ...

    @property
    def max_prompt_seconds(self) -> float:
        """The longest voice prompt worth giving; longer ones are trimmed before cloning."""
        ...

    def clone(self, prompt: PcmChunk) -> bytes:
        """The voice in `prompt` (mono, at `sample_rate`), as a state file's bytes that
        `SynthesisRequest.voice` may name once stored on disk."""
        ...


@runtime_checkable
class Elastic(Protocol):
    """An engine whose compute width can change between jobs and inside one.

    The pool gives a job every core while it runs alone and narrows it to its worker's own
    cores when others arrive; it confines the worker's threads to those cores itself, and tells
    the engine the thread count so its next step (a sentence, a segment) runs with that many.
    """

    def use_threads(self, threads: int) -> None:
        """Run the steps that follow with `threads` compute threads (one of
        `EngineConfig.widths`)."""
        ...


@runtime_checkable
class SideBySide(Protocol):
    """An `Elastic` engine that can speak two segments of one request at once, one in each of
    two threads, both at its narrowest width (see `speechgate.lanes`): its model's session runs
    concurrent calls, and what it shares besides (a phonemizer, caches) is safe to share or
    locked. Two sentences that way, a core each, make more audio a second than one after the
    other on both cores: a session's threads wait for each other at every step of the graph.
    """

    @property
    def side_by_side(self) -> bool:
        """Whether `synthesize` (and `synthesize_timed`) may run so."""
        ...


@runtime_checkable
class Paced(Protocol):
    """An engine whose first audio waits for the end of its segment (it renders a segment
    whole), with an estimate of how fast: the first segment is sized so that its audio comes
    early (`SegmentLimits.for_speed`). An engine that streams within a segment, frame by
    frame, gains nothing from a shorter first segment and is not `Paced`."""

    @property
    def characters_per_second(self) -> float:
        """Characters of text spoken per second of one worker's compute, about: the estimate
        until jobs have measured it."""
        ...


def estimated_speed(engine: Engine) -> float | None:
    """`engine`'s `Paced.characters_per_second`, or None if it is not `Paced`."""
    return engine.characters_per_second if isinstance(engine, Paced) else None


@dataclass(frozen=True)
class EngineInfo:
    """What a loaded engine can do, as the catalog knows it (each worker reports it once it
    is ready)."""

    name: str
    sample_rate: int
    supports_instructions: bool
    voices: tuple[Voice, ...]
    supports_seed: bool = False
    blends_voices: bool = False
    can_clone: bool = False
    max_prompt_seconds: float = 0.0
    phonemes: bool = False
    """Whether the engine speaks `[[ IPA ]]` blocks in its text as those phonemes
    (`Engine.phonemes`)."""
    characters_per_second: float | None = None
    """The engine's `Paced` estimate; None if it is not `Paced`."""
    samples_randomly: bool = False
    """Whether the same request speaks differently each time unless it gives a seed (the
    engine's `samples_randomly` attribute, where it has one): pocket-tts."""

    @classmethod
    def of(cls, engine: Engine) -> EngineInfo:
        cloner = engine if isinstance(engine, VoiceCloner) and engine.can_clone else None
        return cls(
            engine.name,
            engine.sample_rate,
            engine.supports_instructions,
            tuple(engine.voices()),
            supports_seed=engine.supports_seed,
            blends_voices=engine.blends_voices,
            can_clone=cloner is not None,
            max_prompt_seconds=cloner.max_prompt_seconds if cloner else 0.0,
            phonemes=engine.phonemes,
            characters_per_second=estimated_speed(engine),
            samples_randomly=bool(getattr(engine, "samples_randomly", False)),
        )


@runtime_checkable
class WordTimer(Protocol):
    """An engine that knows when each word it speaks is heard.

    `synthesize_timed` yields the same audio `synthesize` would, each chunk with the words first
    known with it (`TimedChunk`): characters are offsets into `request.text`, seconds are from
    the start of this call's audio, `request.speed` included.
    """

    def synthesize_timed(self, request: SynthesisRequest) -> Iterator[TimedChunk]:
        """Yield PCM with word times as it is produced. Stopping early abandons the job."""
        ...
