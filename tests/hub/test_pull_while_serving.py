"""A voice pulled over the admin API while the server is busy: no request fails, and the new
voice speaks at once, without a restart."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers.audio import decode_audio
from tests.helpers.hub import FakeHub, fake_hub, publish_piper_voices
from tests.helpers.server import RunningServer, running_server, sdk_client
from tests.helpers.settings import make_settings, share_engine_data

pytestmark = pytest.mark.slow

LESSAC = "en_US-lessac-medium"
ADMIN_KEY = "sk-admin-test-key-serving-0123456789abcdef"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, FakeHub]]:
    with fake_hub() as hub:
        publish_piper_voices(hub, [LESSAC])
        data_dir = tmp_path_factory.mktemp("data")
        # Its own models; joe, which its worker loads at start, from the run's optimized copy.
        share_engine_data(data_dir)
        # One worker per engine: the talker's requests go one at a time.
        settings = make_settings(
            pool={"workers": 1},
            auth={"admin_key": ADMIN_KEY},
            hub={"endpoint": hub.url},
            data_dir=data_dir,
        )
        with running_server(settings) as running:
            yield running, hub


def _speak(url: str, model: str, voice: str) -> httpx.Response:
    body = {"model": model, "voice": voice, "input": "Still here.", "response_format": "pcm"}
    return httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)


def test_requests_during_a_pull_succeed_and_the_voice_speaks_at_once(
    server: tuple[RunningServer, FakeHub],
) -> None:
    running, hub = server
    pulled = threading.Event()
    during: list[tuple[str, int]] = []
    statuses: list[int] = []

    def keep_speaking() -> None:
        # Both engines, back to back, until the pull has ended and a few more went through.
        after = 0
        while after < 4:
            for model, voice in (("piper", "alloy"), ("espeak", "alloy")):
                finished_before = pulled.is_set()
                response = _speak(running.url, model, voice)
                statuses.append(response.status_code)
                if not finished_before:
                    during.append((model, response.status_code))
                after += finished_before

    talker = threading.Thread(target=keep_speaking)
    talker.start()
    try:
        with httpx.stream(
            "POST",
            f"{running.url}/v1/admin/voices/pull",
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
            json={"ref": f"piper:{LESSAC}"},
            timeout=120,
        ) as response:
            assert response.status_code == 200
            events = [json.loads(line) for line in response.iter_lines() if line]
    finally:
        pulled.set()
        talker.join(timeout=300)
    assert events[-1]["type"] == "installed", events[-1]
    assert len(hub.downloads(f"{LESSAC}.onnx")) == 1
    # Requests ran while the pull did, and none failed, before or after it.
    assert during and set(statuses) == {200}

    # The new voice: listed and spoken with at once, on the running workers.
    listed = httpx.get(f"{running.url}/v1/audio/voices", params={"model": "piper"}).json()
    assert LESSAC in {voice["id"] for voice in listed["voices"]}
    with sdk_client(running) as client:
        spoken = client.audio.speech.with_raw_response.create(
            model="piper", voice=LESSAC, input="A voice pulled a moment ago.", response_format="wav"
        )
    assert spoken.headers["x-speechgate-voice"] == LESSAC
    audio = decode_audio(spoken.content, "wav")
    assert audio.duration > 1.0 and audio.rms > 0.01
