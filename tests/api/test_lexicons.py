"""Lexicons applied to speech, through a real server with keys and the fake engine (whose audio
lasts as long as the text it is given): the operator's on every request and front end, a key's
dictionaries where a request names them, another key's refused before admission."""

# ruff: noqa: RUF001 - IPA in strings
from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from wyoming.audio import AudioChunk, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeVoice

from speechgate.api.app import create_app
from speechgate.catalog import normalize
from speechgate.workers.interface import StartupError
from tests.helpers.inprocess import InProcessApp, http_client, in_process, websocket
from tests.helpers.server import RunningServer, free_port, running_server
from tests.helpers.settings import fake_settings, make_settings
from tests.helpers.tenancy import ADMIN_KEY, new_key

OPERATOR = "Zorblax"
OPERATOR_SAYS = "the operator's own much longer name for it"
NGINX = {"type": "alias", "string_to_replace": "nginx", "alias": "engine x, the web server"}
TOMATO = {"type": "phoneme", "string_to_replace": "tomato", "phoneme": "təˈmɑːtoʊ"}
SSML_IGNORED = "x-speechgate-ssml-ignored"


@pytest.fixture(scope="module")
def wyoming_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, wyoming_port: int) -> Iterator[InProcessApp]:
    folder = tmp_path_factory.mktemp("lexicons")
    lexicon = folder / "lexicon.yaml"
    lexicon.write_text(
        f'- {{type: alias, string_to_replace: {OPERATOR}, alias: "{OPERATOR_SAYS}"}}\n'
    )
    settings = fake_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": f"sqlite:///{folder / 'store.db'}"},
        text={"lexicon_path": lexicon},
        wyoming={"uri": f"tcp://127.0.0.1:{wyoming_port}"},
    )
    with in_process(settings) as server:
        yield server


Served = InProcessApp | RunningServer


def add_dictionary(server: Served, secret: str, *rules: dict[str, Any]) -> dict[str, Any]:
    with http_client(server, headers={"xi-api-key": secret}) as http:
        made = http.post(
            "/v1/pronunciation-dictionaries/add-from-rules",
            json={"name": "test", "rules": list(rules)},
        )
    assert made.status_code == 200, made.text
    body: dict[str, Any] = made.json()
    return body


def locators(*dictionaries: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"pronunciation_dictionary_id": d["id"], "version_id": d["version_id"]}
        for d in dictionaries
    ]


def openai_speech(
    server: Served, secret: str, text: str, model: str = "fake", **extra: Any
) -> httpx.Response:
    body = {"model": model, "voice": "alloy", "input": text, "response_format": "pcm", **extra}
    with http_client(server, headers={"Authorization": f"Bearer {secret}"}) as http:
        return http.post("/v1/audio/speech", json=body)


def elevenlabs_timed(
    server: Served, secret: str, text: str, model: str = "fake", **extra: Any
) -> httpx.Response:
    with http_client(server, headers={"xi-api-key": secret}) as http:
        return http.post(
            "/v1/text-to-speech/alloy/with-timestamps?output_format=pcm_16000",
            json={"text": text, "model_id": model, **extra},
        )


def spoken(response: httpx.Response) -> str:
    """What the engine was given to say, as ElevenLabs' `normalized_alignment` spells it."""
    assert response.status_code == 200, response.text
    return "".join(response.json()["normalized_alignment"]["characters"])


def written(response: httpx.Response) -> str:
    return "".join(response.json()["alignment"]["characters"])


def test_a_named_alias_changes_what_is_said_on_both_routes(keyed: InProcessApp) -> None:
    _, secret = new_key(keyed)
    mine = add_dictionary(keyed, secret, NGINX)
    text = "We run nginx."
    plain = openai_speech(keyed, secret, text)
    aliased = openai_speech(keyed, secret, text, pronunciation_dictionary_locators=locators(mine))
    assert plain.status_code == aliased.status_code == 200, aliased.text
    # The fake engine's audio lasts as long as its text: the alias is 20 characters longer.
    assert len(aliased.content) > len(plain.content) * 1.5
    timed = elevenlabs_timed(keyed, secret, text, pronunciation_dictionary_locators=locators(mine))
    assert "engine x, the web server" in spoken(timed)
    assert written(timed) == text
    assert "nginx" in spoken(elevenlabs_timed(keyed, secret, text))


def test_the_operators_lexicon_applies_to_every_request(
    keyed: InProcessApp, wyoming_port: int
) -> None:
    _, secret = new_key(keyed)
    text, unknown = f"Meet {OPERATOR}.", "Meet Qorblax."
    longer = len(openai_speech(keyed, secret, text).content)
    assert longer > len(openai_speech(keyed, secret, unknown).content) * 2
    assert OPERATOR_SAYS in spoken(elevenlabs_timed(keyed, secret, text))
    # Named dictionaries go over it, they do not replace it.
    mine = add_dictionary(keyed, secret, NGINX)
    both = elevenlabs_timed(
        keyed, secret, f"{text} nginx", pronunciation_dictionary_locators=locators(mine)
    )
    assert OPERATOR_SAYS in spoken(both) and "engine x" in spoken(both)
    assert wyoming_seconds(wyoming_port, text) > wyoming_seconds(wyoming_port, unknown) * 2


def wyoming_seconds(port: int, text: str) -> float:
    async def speak() -> float:
        pcm = 0
        async with AsyncTcpClient("127.0.0.1", port) as connection:
            voice = SynthesizeVoice(name="en-high")
            await connection.write_event(Synthesize(text=text, voice=voice).event())
            while True:
                event = await asyncio.wait_for(connection.read_event(), 60)
                assert event is not None
                if AudioChunk.is_type(event.type):
                    chunk = AudioChunk.from_event(event)
                    pcm += len(chunk.audio) // chunk.width
                    rate = chunk.rate
                elif AudioStop.is_type(event.type):
                    return pcm / rate

    return asyncio.run(speak())


def test_another_keys_dictionary_is_not_found_before_admission(keyed: InProcessApp) -> None:
    _, theirs = new_key(keyed)
    their_dictionary = add_dictionary(keyed, theirs, NGINX)
    # One request a day: a refusal that had been admitted would leave none for the last one.
    _, secret = new_key(keyed, requests_per_second=1 / 86400, burst=1)
    named = {"pronunciation_dictionary_locators": locators(their_dictionary)}
    refused = openai_speech(keyed, secret, "nginx", **named)
    assert refused.status_code == 404
    error = refused.json()["error"]
    assert error["code"] == "pronunciation_dictionary_not_found"
    assert error["param"] == "pronunciation_dictionary_locators"
    refused = elevenlabs_timed(keyed, secret, "nginx", **named)
    assert refused.status_code == 404
    assert refused.json()["detail"]["status"] == "pronunciation_dictionary_not_found"
    unknown = [{"pronunciation_dictionary_id": "pd_nothing"}]
    assert (
        openai_speech(keyed, secret, "x", pronunciation_dictionary_locators=unknown).status_code
        == 404
    )
    mine = add_dictionary(keyed, secret, NGINX)
    wrong_version = [{**locators(mine)[0], "version_id": "pdv_other"}]
    refused = elevenlabs_timed(keyed, secret, "x", pronunciation_dictionary_locators=wrong_version)
    assert refused.status_code == 400
    assert refused.json()["detail"]["status"] == "pronunciation_dictionary_version_not_found"
    four = locators(mine) * 4
    refused = openai_speech(keyed, secret, "x", pronunciation_dictionary_locators=four)
    assert refused.status_code == 400
    # None of the refusals took the key's one request.
    allowed = openai_speech(
        keyed, secret, "nginx", pronunciation_dictionary_locators=locators(mine)
    )
    assert allowed.status_code == 200, allowed.text
    assert openai_speech(keyed, secret, "nginx").status_code == 429


def test_a_session_naming_another_keys_dictionary_is_refused(keyed: InProcessApp) -> None:
    _, theirs = new_key(keyed)
    their_dictionary = add_dictionary(keyed, theirs, NGINX)
    _, secret = new_key(keyed)
    session = {
        "model": "fake",
        "voice": "alloy",
        "pronunciation_dictionary_locators": locators(their_dictionary),
    }
    headers = {"Authorization": f"Bearer {secret}"}
    with websocket(keyed, "/v1/audio/speech/stream", headers) as ws:
        ws.send(json.dumps({"type": "session.update", "session": session}))
        event = json.loads(ws.recv(timeout=30))
    assert event["type"] == "error"
    assert event["error"]["code"] == "pronunciation_dictionary_not_found"


@pytest.fixture
def fake_phonemes(keyed: InProcessApp, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fake engine as one that cannot speak phonemes, whatever it can."""
    catalog = keyed.runtime.catalog
    for name, model in list(catalog._models.items()):
        if model.engine.name == "fake":
            engine = dataclasses.replace(model.engine, phonemes=False)
            monkeypatch.setitem(catalog._models, name, dataclasses.replace(model, engine=engine))
    assert not catalog.model("fake").engine.phonemes and normalize("fake") in catalog._models
    yield


@pytest.mark.usefixtures("fake_phonemes")
def test_a_phoneme_rule_on_an_engine_without_phonemes_is_a_400_naming_it(
    keyed: InProcessApp,
) -> None:
    _, secret = new_key(keyed)
    mine = add_dictionary(keyed, secret, TOMATO)
    named = {"pronunciation_dictionary_locators": locators(mine)}
    refused = openai_speech(keyed, secret, "A tomato.", **named)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "phonemes_unsupported" and "'fake'" in error["message"]
    assert error["param"] == "pronunciation_dictionary_locators"
    refused = elevenlabs_timed(keyed, secret, "A tomato.", **named)
    assert refused.status_code == 400
    assert refused.json()["detail"]["status"] == "phonemes_unsupported"
    assert "'fake'" in refused.json()["detail"]["message"]
    # The rule matching nothing, the request is spoken.
    assert openai_speech(keyed, secret, "A potato.", **named).status_code == 200


def test_ssml_the_server_ignores_is_named_in_a_header_on_both_routes(keyed: InProcessApp) -> None:
    _, secret = new_key(keyed)
    text = "<speak><emphasis>Hello</emphasis> <voice name='x'>there</voice>.</speak>"
    assert openai_speech(keyed, secret, text).headers[SSML_IGNORED] == "emphasis, voice"
    timed = elevenlabs_timed(keyed, secret, text)
    assert timed.headers[SSML_IGNORED] == "emphasis, voice"
    assert SSML_IGNORED not in openai_speech(keyed, secret, "<speak>Hi.</speak>").headers
    refused = openai_speech(keyed, secret, "<speak>Hello <break time='1s'></speak>")
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_ssml"


def test_a_lexicon_file_that_turned_bad_fails_start_up(tmp_path: Path) -> None:
    lexicon = tmp_path / "lexicon.json"
    lexicon.write_text(json.dumps([NGINX]))
    settings = fake_settings(text={"lexicon_path": lexicon})
    lexicon.write_text(json.dumps([{**NGINX, "alias": "[[ x ]]"}]))
    with pytest.raises(StartupError, match=r"lexicon_path: .*lexicon\.json: rule 0 \('nginx'\)"):
        create_app(settings)


@pytest.fixture(scope="module")
def espeak() -> Iterator[RunningServer]:
    with running_server(make_settings(engines=["espeak"], pool={"workers": 1})) as server:
        yield server


def test_a_phoneme_rule_is_spoken_by_espeak(espeak: RunningServer) -> None:
    said = httpx.post(
        f"{espeak.url}/v1/pronunciation-dictionaries/add-from-rules",
        json={"name": "ipa", "rules": [TOMATO]},
    ).json()
    named = {"pronunciation_dictionary_locators": locators(said)}
    timed = elevenlabs_timed(espeak, "unused", "A tomato.", model="espeak", **named)
    assert spoken(timed) == "A [[ təˈmɑːtoʊ ]]."
    assert written(timed) == "A tomato."
    plain = elevenlabs_timed(espeak, "unused", "A tomato.", model="espeak")
    assert timed.json()["audio_base64"] != plain.json()["audio_base64"]
