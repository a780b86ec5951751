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
    """A voice an engine can speak with; `language` is a BCP 47 tag where known."""

    id: str
    name: str
    language: str | None = None
    quality: str | None = None
    gender: str | None = None


@dataclass(frozen=True)
class SynthesisRequest:
    """What an engine is asked to say, `voice` already resolved to one of its ids.
    `reference` is a one-off voice prompt replacing `voice`, for an engine that clones."""

    text: str
    voice: str
    speed: float = 1.0
    instructions: str | None = None
    seed: int | None = None
    reference: PcmChunk | None = None
    text_options: TextOptions | None = None
    """How the pipeline prepares `text`; engines get each prepared segment with it cleared."""


@dataclass(frozen=True)
class EngineConfig:
    """How to build an engine; picklable, so a worker process can build its own copy.

    `threads` is its worker's own cores, `max_threads` the most a job alone on the machine may
    get (an `Elastic` engine prepares for both). `data_dir` holds files the engine derives
    (None: a temporary place); `models_dir` holds pulled voices and models.
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
        return tuple(sorted({self.threads, max(self.threads, self.max_threads)}))


@runtime_checkable
class Engine(Protocol):
    """A loaded text-to-speech engine; not thread-safe unless an implementation says so."""

    @property
    def name(self) -> str:
        """The engine id, also the model id clients may ask for (e.g. "piper")."""
        ...

    @property
    def sample_rate(self) -> int:
        """The rate of every chunk `synthesize` yields."""
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
        """Whether `SynthesisRequest.voice` may be a blend of its voices."""
        ...

    @property
    def phonemes(self) -> bool:
        """Whether phoneme blocks ("[[ həloʊ ]]") in the text are spoken as phonemes; an
        engine without must not be given any, or it would read the symbols aloud."""
        ...

    def voices(self) -> Sequence[Voice]: ...

    def synthesize(self, request: SynthesisRequest) -> Iterator[PcmChunk]:
        """Yield PCM as it is produced. Stopping iteration early abandons the job."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class VoiceCloner(Protocol):
    """An engine that can speak in a voice it is shown: a few seconds of someone speaking."""

    @property
    def can_clone(self) -> bool:
        """Whether this model has the weights cloning needs (some releases do not)."""
        ...

    @property
    def max_prompt_seconds(self) -> float:
        """The longest voice prompt worth giving; longer ones are trimmed."""
        ...

    def clone(self, prompt: PcmChunk) -> bytes:
        """The voice in `prompt` (mono, at `sample_rate`) as a state file's bytes."""
        ...


@runtime_checkable
class Elastic(Protocol):
    """An engine whose compute width can change between jobs and inside one: the pool moves
    the worker's threads and tells the engine how many its next step runs with."""

    def use_threads(self, threads: int) -> None:
        """Run the steps that follow with `threads`, one of `EngineConfig.widths`."""
        ...


@runtime_checkable
class SideBySide(Protocol):
    """An `Elastic` engine that can speak two segments of one request at once, each on its
    own thread at its narrowest width (`speechgate.lanes`): its session runs concurrent calls
    and what else it shares is safe to share or locked."""

    @property
    def side_by_side(self) -> bool:
        """Whether `synthesize` (and `synthesize_timed`) may run so."""
        ...


@runtime_checkable
class Paced(Protocol):
    """An engine that renders a segment whole, with an estimate of its speed, so the first
    segment can be sized for early audio (`SegmentLimits.for_speed`)."""

    @property
    def characters_per_second(self) -> float:
        """Characters spoken per second of one worker's compute, until jobs measure it."""
        ...


def estimated_speed(engine: Engine) -> float | None:
    return engine.characters_per_second if isinstance(engine, Paced) else None


@dataclass(frozen=True)
class EngineInfo:
    """What a loaded engine can do, as each worker reports it once ready."""

    name: str
    sample_rate: int
    supports_instructions: bool
    voices: tuple[Voice, ...]
    supports_seed: bool = False
    blends_voices: bool = False
    can_clone: bool = False
    max_prompt_seconds: float = 0.0
    phonemes: bool = False
    characters_per_second: float | None = None
    samples_randomly: bool = False
    """Whether the same request speaks differently each time unless it gives a seed."""

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
    """An engine that knows when each word it speaks is heard: `synthesize_timed` yields what
    `synthesize` would, each chunk with the words first known with it."""

    def synthesize_timed(self, request: SynthesisRequest) -> Iterator[TimedChunk]: ...
