"""Engines as plugins: a package installed beside speechgate (tests/plugin_engine, the `tone`
engine, installed by `make setup`) adds an engine through its entry point alone: it is listed,
speaks through every front end, and is gone when its entry point is."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from pydantic import ValidationError
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from speechgate import catalog as catalog_module
from speechgate.engines import EngineConfig, discover, load_engine
from speechgate.engines import plugin as plugin_module
from speechgate.errors import ModelNotFound
from speechgate.settings import Settings
from tests.helpers.server import RunningServer, free_port, running_server
from tests.helpers.settings import fake_settings
from tests.helpers.streaming import session_events, speech_session

TEXT = "A tone for each sentence. And a second one."
# The tone engine's voices' pitches (speechgate_tone_engine.VOICES).
ALTO, BASS, SOPRANO = 392.0, 165.0, 523.0


def pitch(pcm: bytes, rate: int) -> float:
    """The strongest frequency of 16-bit mono PCM."""
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    assert samples.size > rate // 10, "less than 0.1 s of audio"
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.size)))
    return float(np.fft.rfftfreq(samples.size, 1 / rate)[np.argmax(spectrum)])


@pytest.fixture
def uninstalled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if the tone package were uninstalled: its entry point is not found."""
    found = plugin_module._entry_points

    def without_tone() -> list[importlib.metadata.EntryPoint]:
        return [entry for entry in found() if entry.name != "tone"]

    monkeypatch.setattr(plugin_module, "_entry_points", without_tone)
    discover.cache_clear()
    yield
    monkeypatch.undo()
    discover.cache_clear()


def test_the_installed_package_is_found_through_its_entry_point() -> None:
    tone = discover()["tone"]
    assert tone.package == "speechgate-tone-engine"
    assert tone.installed() and not tone.default
    # Loaded only where named, like speechgate's own fake engine.
    assert "tone" not in Settings().engines
    settings = fake_settings(engines=["tone"])
    assert settings.default_engine == "tone"
    assert settings.voice_aliases["tone"]["alloy"] == "alto"
    assert settings.resolved_model_aliases()["tone-1"] == "tone"


def test_load_engine_builds_it_from_its_factory() -> None:
    engine = load_engine(EngineConfig("tone", options={"volume": "0.5"}))
    assert engine.name == "tone"
    assert [voice.id for voice in engine.voices()] == ["alto", "bass", "soprano"]


def test_its_options_are_checked_at_start_up() -> None:
    with pytest.raises(ValidationError, match=r"engine 'tone' takes \['volume'\], not \['pitch'\]"):
        fake_settings(engines=["tone"], engine_options={"tone": {"pitch": "2"}})


def test_an_unknown_engine_is_refused_naming_the_installed_ones() -> None:
    with pytest.raises(ValidationError, match=r"unknown engines \['nope'\]; installed: \[.*'tone'"):
        fake_settings(engines=["nope"])


@pytest.mark.usefixtures("uninstalled")
def test_without_its_entry_point_the_engine_is_unknown() -> None:
    assert "tone" not in discover()
    assert "tone" not in Settings().voice_aliases
    with pytest.raises(ValidationError, match=r"unknown engines \['tone'\]"):
        fake_settings(engines=["tone"])
    settings = fake_settings()
    assert "tone-1" not in settings.resolved_model_aliases()
    # Not even known as an engine this server could load.
    with pytest.raises(ModelNotFound) as refused:
        catalog_module.engine_for_model(settings, "tone")
    assert "does not exist" in str(refused.value)


@pytest.mark.usefixtures("uninstalled")
def test_without_its_entry_point_the_catalog_does_not_list_it() -> None:
    with running_server(fake_settings()) as server:
        models = httpx.get(f"{server.url}/v1/models").json()["data"]
        voices = httpx.get(f"{server.url}/v1/audio/voices").json()["voices"]
        refused = httpx.post(
            f"{server.url}/v1/audio/speech",
            json={"model": "tone", "voice": "alloy", "input": TEXT},
        )
    assert "tone" not in {model["id"] for model in models}
    assert "tone" not in {voice["model"] for voice in voices}
    assert refused.status_code == 404
    error = refused.json()["error"]
    assert error["code"] == "model_not_found"
    # Not "speechgate's 'tone' engine, which this server has not loaded": unknown altogether.
    assert error["message"].startswith("The model 'tone' does not exist.")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningServer, int]]:
    port = free_port()
    settings = fake_settings(engines=["fake", "tone"], wyoming={"uri": f"tcp://127.0.0.1:{port}"})
    with running_server(settings) as server:
        yield server, port


@pytest.mark.slow
def test_it_is_listed_with_its_voices_and_model_alias(served: tuple[RunningServer, int]) -> None:
    server, _ = served
    models = {model["id"] for model in httpx.get(f"{server.url}/v1/models").json()["data"]}
    assert {"tone", "tone-1", "fake"} <= models
    voices = httpx.get(f"{server.url}/v1/audio/voices", params={"model": "tone"}).json()["voices"]
    assert {voice["id"] for voice in voices} == {"alto", "bass", "soprano"}
    assert {voice["model"] for voice in voices} == {"tone"}


@pytest.mark.slow
def test_it_speaks_through_the_openai_route(served: tuple[RunningServer, int]) -> None:
    server, _ = served
    answer = httpx.post(
        f"{server.url}/v1/audio/speech",
        json={"model": "tone-1", "voice": "ash", "input": TEXT, "response_format": "pcm"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert pitch(answer.content, 24000) == pytest.approx(BASS, abs=5)


@pytest.mark.slow
def test_it_speaks_through_the_elevenlabs_route(served: tuple[RunningServer, int]) -> None:
    server, _ = served
    answer = httpx.post(
        f"{server.url}/v1/text-to-speech/alto",
        params={"output_format": "pcm_22050"},
        json={"text": TEXT, "model_id": "tone"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert pitch(answer.content, 22050) == pytest.approx(ALTO, abs=5)


@pytest.mark.slow
def test_it_speaks_through_a_websocket_session(served: tuple[RunningServer, int]) -> None:
    server, _ = served
    with speech_session(server, model="tone", voice="female", response_format="pcm") as ws:
        ws.send(json.dumps({"type": "input_text.delta", "delta": TEXT}))
        ws.send(json.dumps({"type": "input_text.done"}))
        events, audio = session_events(ws)
    assert events[-1]["type"] == "session.done", events[-1]
    assert pitch(audio, 24000) == pytest.approx(ALTO, abs=5)


@pytest.mark.slow
def test_it_speaks_and_is_described_through_wyoming(served: tuple[RunningServer, int]) -> None:
    _, port = served

    async def go() -> tuple[Info, int, bytes]:
        async with AsyncTcpClient("127.0.0.1", port) as connection:
            await connection.write_event(Describe().event())
            info = Info.from_event(await asyncio.wait_for(connection.read_event(), 60))
            voice = SynthesizeVoice(name="soprano")
            await connection.write_event(Synthesize(text=TEXT, voice=voice).event())
            start = AudioStart.from_event(await asyncio.wait_for(connection.read_event(), 60))
            pcm = bytearray()
            while True:
                event = await asyncio.wait_for(connection.read_event(), 60)
                assert event is not None
                if AudioStop.is_type(event.type):
                    return info, start.rate, bytes(pcm)
                pcm += AudioChunk.from_event(event).audio

    info, rate, pcm = asyncio.run(go())
    programs = {program.name: program for program in info.tts}
    assert programs["tone"].attribution.name == "Tone"
    assert [voice.name for voice in programs["tone"].voices] == ["alto", "bass", "soprano"]
    assert rate == 22050
    assert pitch(pcm, rate) == pytest.approx(SOPRANO, abs=5)
