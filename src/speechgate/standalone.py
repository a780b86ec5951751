"""In-process synthesis for the CLI: one engine, no server, the same validation and encoding."""

from __future__ import annotations

from pathlib import Path

from speechgate.audio.formats import OutputFormat
from speechgate.captions import write_captions
from speechgate.catalog import Catalog, engine_for_model
from speechgate.cloning.cloner import VoiceCloning
from speechgate.cloning.library import VoiceLibrary
from speechgate.dictionaries import Dictionaries, operator_lexicon
from speechgate.engines import Engine, load_engine
from speechgate.engines.base import EngineConfig, EngineInfo
from speechgate.lanes import Lanes
from speechgate.pipeline import render
from speechgate.runtime import engine_config
from speechgate.service import SpeechService
from speechgate.settings import Settings
from speechgate.speech_request import Normalization, SpeechRequest
from speechgate.timing import WordTime


def stored_voices(settings: Settings) -> VoiceLibrary:
    return VoiceLibrary(settings.voices_dir)


def load_catalog(settings: Settings, model: str) -> tuple[Catalog, Engine, EngineConfig]:
    """Load only the engine that `model` names, and a catalog that knows just it; and the
    config the engine was built from."""
    name = engine_for_model(settings, model)
    config = engine_config(settings, name)
    engine = load_engine(config)
    catalog = Catalog(
        {name: EngineInfo.of(engine)}, {model: name}, settings.voice_aliases, settings.models_dir
    )
    return catalog, engine, config


def synthesize_to_file(
    settings: Settings,
    text: str,
    output: Path,
    *,
    model: str,
    voice: str,
    fmt: OutputFormat,
    speed: float,
    seed: int | None = None,
    captions: Path | None = None,
    normalization: Normalization = "auto",
) -> float:
    """Speak `text` into `output` (with a built-in or a stored voice); returns the seconds of
    audio written. With `captions` (a `.srt` or `.vtt` path), writes its words' times there."""
    catalog, engine, config = load_catalog(settings, model)
    # Alone on the machine, as a server's lone job is: every core, later sentences in pairs.
    lanes = Lanes(engine, config.widths)
    lanes.set_width(lanes.widest)
    try:
        # Stored voices need no pool: they are files the engine reads.
        voices = VoiceCloning(
            catalog, {}, stored_voices(settings), settings.cloning.min_speech_seconds
        )
        request = SpeechRequest(
            model=model,
            voice=voice,
            format=fmt,
            text=text,
            speed=speed,
            seed=seed,
            word_times=captions is not None,
            normalization=normalization,
        )
        dictionaries = Dictionaries(operator_lexicon(settings.text.lexicon_path))
        service = SpeechService(
            settings, catalog, pools={}, voices=voices, dictionaries=dictionaries
        )
        plan = service.plan(request)
        seconds = 0.0
        words: list[WordTime] = []
        with output.open("wb") as file:
            # The encoder writes the file itself: it is seekable, so the headers a stream
            # leaves open (sizes, sample counts, MP3's gapless delay) come out right.
            for chunk in render(engine, plan.request, plan.output, file, lanes):
                seconds += chunk.audio_seconds
                words += chunk.words
        if captions is not None:
            # The words' times already count what a decoder plays first (`StreamEncoder.priming`).
            write_captions(captions, text, words)
        return seconds
    finally:
        lanes.close()
        engine.close()
