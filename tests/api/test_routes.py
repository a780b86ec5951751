"""The routes that the other fast tests do not reach, in-process on the fake engine, so that the
inner loop (`make test-fast`) answers on every route of every HTTP front end: the API
documents, ElevenLabs' streamed speech and voices, the model and voice cards, and the routing
admin, the keys' admin, usage and readiness."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from speechgate.engines.fake import SECONDS_PER_CHARACTER
from tests.helpers.audio import decode_audio
from tests.helpers.inprocess import InProcessApp, in_process
from tests.helpers.settings import fake_settings
from tests.helpers.tenancy import ADMIN_KEY, admin, new_key, speak, usage
from tests.helpers.waiting import wait_for

TEXT = "Hello there. This is the fake engine."


def assert_envelope(response: Any, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_the_api_documents_are_served(fake_app: InProcessApp, path: str) -> None:
    page = fake_app.http.get(path)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")


def test_a_model_card_and_the_audio_models(fake_app: InProcessApp) -> None:
    card = fake_app.http.get("/v1/models/fake")
    assert card.status_code == 200, card.text
    assert card.json()["id"] == "fake"
    assert_envelope(fake_app.http.get("/v1/models/nothing"), 404, "model_not_found")
    models = fake_app.http.get("/v1/audio/models").json()["models"]
    assert "fake" in [model["id"] for model in models]


def test_elevenlabs_voices_list_and_one_voice(fake_app: InProcessApp) -> None:
    voices = fake_app.http.get("/v1/voices").json()["voices"]
    assert {"en-high", "en-low", "de-mid"} <= {voice["voice_id"] for voice in voices}
    voice = fake_app.http.get("/v1/voices/de-mid")
    assert voice.status_code == 200, voice.text
    assert voice.json()["labels"]["language"] == "de"
    assert fake_app.http.get("/v1/voices/nobody").status_code == 404


def test_elevenlabs_streamed_speech_is_the_texts_length(fake_app: InProcessApp) -> None:
    body = {"text": TEXT, "model_id": "fake"}
    with fake_app.http.stream(
        "POST", "/v1/text-to-speech/alloy/stream?output_format=pcm_16000", json=body
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "audio/pcm"
        parts = [part for part in response.iter_bytes() if part]
    audio = decode_audio(b"".join(parts), "pcm", pcm_rate=16000)
    # A tone per sentence, as long as its characters, and the pause between them.
    spoken = len(TEXT.replace(" ", "")) * SECONDS_PER_CHARACTER
    assert spoken < audio.duration < spoken + 1.0
    assert audio.rms > 0.01


def test_elevenlabs_streamed_timestamps_cover_the_text(fake_app: InProcessApp) -> None:
    body = {"text": TEXT, "model_id": "fake"}
    with fake_app.http.stream(
        "POST",
        "/v1/text-to-speech/alloy/stream/with-timestamps?output_format=pcm_16000",
        json=body,
    ) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert len(lines) > 1  # a line as each piece of audio comes
    audio = decode_audio(
        b"".join(base64.b64decode(line["audio_base64"]) for line in lines), "pcm", pcm_rate=16000
    )
    characters = [c for line in lines if line["alignment"] for c in line["alignment"]["characters"]]
    assert "".join(characters) == TEXT
    ends = [
        t
        for line in lines
        if line["alignment"]
        for t in line["alignment"]["character_end_times_seconds"]
    ]
    assert ends == sorted(ends)
    assert ends[-1] <= audio.duration + 0.01


def test_cloning_with_an_engine_that_cannot_is_refused(fake_app: InProcessApp) -> None:
    sample = {"audio_sample": ("me.wav", b"RIFF", "audio/wav")}
    refused = fake_app.http.post("/v1/audio/voices", data={"name": "me"}, files=sample)
    assert_envelope(refused, 400, "cloning_unsupported")
    assert refused.json()["error"]["param"] == "model"
    assert fake_app.http.get("/v1/audio/voices/voice_nobody").status_code == 404


ROUTES = """
providers:
  one: {kind: local, model: fake}
  two: {kind: local, model: fake}
routes:
  tts-1: {providers: {one: 50, two: 50}}
"""


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessApp]:
    routes = tmp_path_factory.mktemp("routes") / "routes.yaml"
    routes.write_text(ROUTES)
    settings = fake_settings(routing={"routes_file": routes}, auth={"admin_key": ADMIN_KEY})
    with in_process(settings) as app:
        yield app


def test_the_routing_admin_sets_weights_and_enables_a_provider(routed: InProcessApp) -> None:
    with routed.client("/v1/admin/routing", {"Authorization": f"Bearer {ADMIN_KEY}"}) as api:
        weighted = api.put("/routes/tts-1/weights", json={"weights": {"one": 100, "two": 0}})
        assert weighted.status_code == 200, weighted.text
        assert weighted.json()["routes"]["tts-1"]["weights"] == {"one": 100, "two": 0}
        disabled = api.post("/providers/two/disable")
        assert disabled.status_code == 200, disabled.text
        enabled = api.post("/providers/two/enable")
        assert enabled.status_code == 200, enabled.text
        assert disabled.json()["providers"]["two"]["enabled"] is False
        assert enabled.json()["providers"]["two"]["enabled"] is True
        assert_envelope(api.post("/providers/nobody/enable"), 404, "not_found")
    spoken = routed.http.post(
        "/v1/audio/speech", json={"model": "tts-1", "voice": "alloy", "input": TEXT}
    )
    assert spoken.status_code == 200, spoken.text


def test_the_routing_admin_promotes_reloads_and_reports(routed: InProcessApp) -> None:
    with routed.client("/v1/admin/routing", {"Authorization": f"Bearer {ADMIN_KEY}"}) as api:
        promoted = api.post("/routes/tts-1/promote", json={"provider": "two"})
        assert promoted.status_code == 200, promoted.text
        assert promoted.json()["routes"]["tts-1"]["weights"] == {"one": 0, "two": 100}
        unknown = api.post("/routes/tts-1/promote", json={"provider": "nobody"})
        assert_envelope(unknown, 404, "not_found")
        # The file again: runtime changes are dropped.
        reloaded = api.post("/reload")
        assert reloaded.status_code == 200, reloaded.text
        assert reloaded.json()["routes"]["tts-1"]["weights"] == {"one": 50, "two": 50}
        shadow = api.get("/shadow")
        assert shadow.status_code == 200, shadow.text
        assert isinstance(shadow.json(), dict)
    assert routed.http.get("/v1/admin/routing").status_code == 401


@pytest.fixture(scope="module")
def keyed() -> Iterator[InProcessApp]:
    with in_process(fake_settings(auth={"mode": "keys", "admin_key": ADMIN_KEY})) as app:
        yield app


def test_readiness_keys_and_usage(keyed: InProcessApp) -> None:
    assert keyed.http.get("/readyz").status_code == 200
    key_id, secret = new_key(keyed)
    with admin(keyed) as api:
        assert key_id in [key["id"] for key in api.get("/admin/keys").json()["data"]]
        one = api.get(f"/admin/keys/{key_id}")
        assert one.status_code == 200, one.text
        assert one.json()["id"] == key_id and "key" not in one.json()
        assert_envelope(api.get("/admin/keys/nobody"), 404, "key_not_found")
    with keyed.sdk(secret) as client:
        speak(client, TEXT)
    wait_for(lambda: usage(keyed, secret)["total"]["requests"] == 1)
    assert usage(keyed, secret)["total"]["characters"] == len(TEXT)
