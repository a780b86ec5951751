"""Voices by language and by the names other servers' clients send, on a real server.

The server's data directory holds Piper items as `speechgate voices pull` installs them: the
joe voice published under other names and languages (its config's language rewritten). The
gateway resolves names against them and the workers speak with them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from websockets.sync.client import connect

from speechgate.voices.naming import Gender
from tests.helpers.audio import decode_audio
from tests.helpers.piper import install_piper_voice, joe_config
from tests.helpers.server import RunningServer, running_server, sdk_client
from tests.helpers.settings import make_settings, share_engine_data

pytestmark = pytest.mark.slow


def install_joe_as(models: Path, key: str, language: str, gender: Gender) -> None:
    """Joe's model under another voice key, its config saying `language` ("de_DE"): linked,
    so it loads from joe's optimized copy rather than being optimized afresh."""
    config = joe_config()
    family, region = language.split("_")
    config["language"] = {**config["language"], "code": language, "family": family}
    config["language"]["region"] = region
    install_piper_voice(models, key, config, gender, linked=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("languages")
    models = data_dir / "models"
    install_joe_as(models, "de_DE-thorsten-medium", "de_DE", "male")
    install_joe_as(models, "en_GB-alan-medium", "en_GB", "male")
    share_engine_data(data_dir)
    settings = make_settings(engines=["piper", "espeak"], pool={"workers": 1}, data_dir=data_dir)
    with running_server(settings) as running:
        yield running


@pytest.fixture
def client(server: RunningServer) -> Iterator[openai.OpenAI]:
    with sdk_client(server) as sdk:
        yield sdk


def speak(server: RunningServer, **body: Any) -> httpx.Response:
    payload = {"model": "tts-1", "input": "Hallo.", "voice": "alloy", "response_format": "wav"}
    return httpx.post(f"{server.url}/v1/audio/speech", json={**payload, **body}, timeout=60)


def error(response: httpx.Response, status: int = 400) -> dict[str, Any]:
    assert response.status_code == status, response.text
    detail: dict[str, Any] = response.json()["error"]
    return detail


def test_voices_are_listed_with_language_and_quality_and_filtered(server: RunningServer) -> None:
    listed = httpx.get(f"{server.url}/v1/audio/voices", params={"language": "de"}).json()
    piper = [v for v in listed["voices"] if v["model"] == "piper"]
    assert piper == [
        {
            "id": "de_DE-thorsten-medium",
            "name": "de_DE-thorsten-medium",
            "model": "piper",
            "language": "de-DE",
            "quality": "medium",
            "gender": "male",
            "type": "builtin",
            "created_at": None,
        }
    ]
    assert {v["model"] for v in listed["voices"]} == {"piper", "espeak"}
    assert all(v["language"].startswith("de") for v in listed["voices"])
    british = httpx.get(
        f"{server.url}/v1/audio/voices", params={"language": "en-GB", "model": "tts-1"}
    ).json()
    assert [v["id"] for v in british["voices"]] == ["en_GB-alan-medium"]


def test_a_voice_installed_while_serving_is_known_after_a_refresh(
    server: RunningServer,
) -> None:
    def french() -> list[str]:
        query = {"language": "fr", "model": "piper"}
        voices = httpx.get(f"{server.url}/v1/audio/voices", params=query).json()["voices"]
        return [v["id"] for v in voices]

    assert french() == []
    install_joe_as(server.runtime.settings.models_dir, "fr_FR-tom-medium", "fr_FR", "male")
    server.runtime.refresh_installed()
    assert french() == ["fr_FR-tom-medium"]


def test_the_voice_that_spoke_is_in_a_header(client: openai.OpenAI) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="en-US-Male", input="Hello.", response_format="wav"
    ) as response:
        assert response.headers["x-speechgate-voice"] == "en_US-joe-medium"
        assert decode_audio(response.read(), "wav").rms > 0.01


def test_a_session_with_a_language_hint_gets_a_voice_of_that_language(
    server: RunningServer,
) -> None:
    session = {"model": "tts-1", "voice": "onyx", "language_hint": "de", "response_format": "wav"}
    with connect(server.url.replace("http", "ws") + "/v1/audio/speech/stream") as ws:
        ws.send(json.dumps({"type": "session.update", "session": session}))
        created = json.loads(ws.recv(timeout=30))
    assert created["session"]["voice"] == "de_DE-thorsten-medium"


def test_language_hint_with_a_generic_voice_speaks_with_a_german_voice(
    client: openai.OpenAI,
) -> None:
    with client.audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="alloy",
        input="Guten Tag, wie geht es Ihnen?",
        response_format="wav",
        extra_body={"language_hint": "de"},
    ) as response:
        assert response.headers["x-speechgate-voice"] == "de_DE-thorsten-medium"
        assert decode_audio(response.read(), "wav").rms > 0.01


def test_a_named_voice_of_another_language_is_refused_with_the_voices_that_would_do(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.audio.speech.create(
            model="piper",
            voice="en_US-joe-medium",
            input="Guten Tag.",
            extra_body={"language": "de"},
        )
    body = raised.value.body
    assert isinstance(body, dict)
    assert (body["code"], body["param"]) == ("unsupported_language", "language")
    assert "de_DE-thorsten-medium" in body["message"]
    assert "(model 'espeak')" in body["message"]


def test_a_language_no_voice_speaks_says_how_to_pull_one(server: RunningServer) -> None:
    refused = error(speak(server, language="it"))
    assert refused["code"] == "unsupported_language"
    assert "`speechgate voices pull piper:it_IT-paola-medium`" in refused["message"]
    assert "it (model 'espeak')" in refused["message"]


def test_language_and_language_hint_must_agree(server: RunningServer) -> None:
    assert error(speak(server, language="de", language_hint="en"))["param"] == "language_hint"
    assert error(speak(server, language="not a tag"))["param"] == "language"
    same = speak(server, voice="en_US-joe-medium", language="en_us", language_hint="en-US")
    assert same.status_code == 200


@pytest.mark.parametrize("model", ["pocket-tts", "pocket-tts-hd", "pocket-tts-rt", "kokoro-82m"])
def test_known_models_not_loaded_are_404_saying_how_to_enable_them(
    server: RunningServer, model: str
) -> None:
    refused = error(speak(server, model=model), 404)
    engine = "pocket" if model.startswith("pocket") else "kokoro"
    assert refused["code"] == "model_not_found"
    assert f"speechgate serve --engine {engine}" in refused["message"]
    assert f"SPEECHGATE_ENGINES=piper,espeak,{engine}" in refused["message"]
    assert f"speechgate[{engine}]" in refused["message"]


@pytest.mark.parametrize("voice", ["en_us_male", "en-US-Male", "EN_US_MALE", "male"])
def test_generic_male_names_speak_with_joe(server: RunningServer, voice: str) -> None:
    response = speak(server, voice=voice, input="Hello.")
    assert response.status_code == 200, response.text
    assert response.headers["x-speechgate-voice"] == "en_US-joe-medium"
    assert decode_audio(response.content, "wav").rms > 0.01


@pytest.mark.parametrize("voice", ["en_us_female", "en-US-Female", "female"])
def test_generic_names_of_voices_not_installed_say_what_to_pull(
    server: RunningServer, voice: str
) -> None:
    refused = error(speak(server, voice=voice))
    assert (refused["code"], refused["param"]) == ("voice_not_installed", "voice")
    assert "`speechgate voices pull piper:en_US-lessac-medium`" in refused["message"]


def test_generic_names_on_espeak_pick_its_variants(server: RunningServer) -> None:
    response = speak(server, model="espeak", voice="en_us_female", input="Hello.")
    assert response.status_code == 200, response.text
    assert response.headers["x-speechgate-voice"] == "en-us+f3"
    german = speak(server, model="espeak", voice="nova", language="de")
    assert german.headers["x-speechgate-voice"] == "de"


def test_an_installed_voice_speaks_by_its_generic_name(server: RunningServer) -> None:
    response = speak(server, voice="de_male")
    assert response.status_code == 200, response.text
    assert response.headers["x-speechgate-voice"] == "de_DE-thorsten-medium"
