"""`auto_pull` on a real server against a fake hub: a request for a voice that is known but not
installed pulls it, then is served; with `auto_pull` off (the default) it is refused with how to
pull it. Over HTTP with the openai SDK and over the WebSocket session."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from websockets.sync.client import connect

from speechgate.voices.installed import find
from tests.helpers.audio import decode_audio
from tests.helpers.hub import FakeHub, fake_hub, publish_piper_voices
from tests.helpers.server import RunningServer, running_server, sdk_client
from tests.helpers.settings import make_settings, share_engine_data

pytestmark = pytest.mark.slow

# The piper alias table's `en_us_female`.
LESSAC = "en_US-lessac-medium"
# One voice per test that pulls (a generic name of piper's table, and its key), so the tests
# share one server and each still starts from a voice that is not installed.
BY_SESSION = ("fr_fr_male", "fr_FR-tom-medium")
CORRUPT = ("en_gb_female", "en_GB-jenny_dioco-medium")


@pytest.fixture(scope="module")
def hub() -> Iterator[FakeHub]:
    with fake_hub() as running:
        publish_piper_voices(running, [LESSAC, BY_SESSION[1], CORRUPT[1]])
        yield running


def _server(
    hub: FakeHub, tmp_path_factory: pytest.TempPathFactory, auto_pull: bool
) -> Iterator[RunningServer]:
    data_dir = tmp_path_factory.mktemp("autopull")
    # Its own models and voices; joe, which its worker loads at start, from the run's copy.
    share_engine_data(data_dir)
    settings = make_settings(
        engines=["piper"],
        pool={"workers": 1},
        hub={"auto_pull": auto_pull, "endpoint": hub.url},
        data_dir=data_dir,
    )
    with running_server(settings) as running:
        yield running


@pytest.fixture(scope="module")
def pulling(hub: FakeHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    yield from _server(hub, tmp_path_factory, auto_pull=True)


@pytest.fixture(scope="module")
def refusing(hub: FakeHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    yield from _server(hub, tmp_path_factory, auto_pull=False)


def _speak(server: RunningServer, voice: str) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/audio/speech",
        json={"model": "piper", "input": "Pulled on first use.", "voice": voice},
        timeout=120,
    )


def _listed(server: RunningServer) -> dict[str, dict[str, object]]:
    voices = httpx.get(f"{server.url}/v1/audio/voices", params={"model": "piper"}).json()
    return {voice["id"]: voice for voice in voices["voices"]}


def test_without_auto_pull_the_request_names_the_pull(refusing: RunningServer) -> None:
    response = _speak(refusing, "en_us_female")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("voice_not_installed", "voice")
    assert f"speechgate voices pull piper:{LESSAC}" in error["message"]
    assert find(refusing.runtime.settings.models_dir, "piper", LESSAC) is None
    assert LESSAC not in _listed(refusing)


def test_auto_pull_installs_the_voice_the_catalog_knows_it_and_the_openai_sdk_hears_it(
    pulling: RunningServer, hub: FakeHub
) -> None:
    # One pulled voice for both: each one a worker loads is a 63 MB graph to optimize.
    assert find(pulling.runtime.settings.models_dir, "piper", LESSAC) is None
    before = len(hub.downloads(f"{LESSAC}.onnx"))
    with sdk_client(pulling) as client:
        response = client.audio.speech.with_raw_response.create(
            model="piper", voice="en_us_female", input="Pulled on first use.", response_format="wav"
        )
    assert find(pulling.runtime.settings.models_dir, "piper", LESSAC) is not None
    assert len(hub.downloads(f"{LESSAC}.onnx")) == before + 1
    assert _listed(pulling)[LESSAC]["language"] == "en-US"
    assert response.status_code == 200, response.text
    assert response.headers["x-speechgate-voice"] == LESSAC
    audio = decode_audio(response.content, "wav")
    assert audio.duration > 0.5 and audio.rms > 0.01


def test_auto_pull_of_a_voice_the_hub_lacks_is_an_openai_error(
    pulling: RunningServer, hub: FakeHub
) -> None:
    # `en_gb_male` means en_GB-alan-medium, which this hub does not publish.
    with sdk_client(pulling) as client, pytest.raises(openai.NotFoundError) as raised:
        client.audio.speech.create(model="piper", voice="en_gb_male", input="Nobody has it.")
    assert raised.value.code == "not_pullable"
    body = raised.value.body
    assert isinstance(body, dict) and body["param"] == "voice"
    assert "en_GB-alan-medium" in raised.value.message
    assert "voices search" in raised.value.message


def test_auto_pull_reports_a_checksum_failure(pulling: RunningServer, hub: FakeHub) -> None:
    path = f"en/en_GB/jenny_dioco/medium/{CORRUPT[1]}.onnx.json"
    hub.corrupt.add(("rhasspy/piper-voices", path))
    try:
        response = _speak(pulling, CORRUPT[0])
    finally:
        hub.corrupt.clear()
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "checksum_mismatch"
    assert find(pulling.runtime.settings.models_dir, "piper", CORRUPT[1]) is None


def test_auto_pull_for_a_websocket_session(pulling: RunningServer) -> None:
    assert find(pulling.runtime.settings.models_dir, "piper", BY_SESSION[1]) is None
    ws_url = pulling.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    with connect(ws_url) as ws:
        ws.send(
            json.dumps(
                {"type": "session.update", "session": {"model": "piper", "voice": BY_SESSION[0]}}
            )
        )
        created = json.loads(ws.recv(timeout=120))
    assert created["type"] == "session.created", created
    assert created["session"]["voice"] == BY_SESSION[1]
    assert find(pulling.runtime.settings.models_dir, "piper", BY_SESSION[1]) is not None
