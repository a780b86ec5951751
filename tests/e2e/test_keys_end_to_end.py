"""Keys and metering end to end with a real engine: the rest of tenancy runs on the fake engine
in tests/api/test_tenancy_server.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.helpers.audio import decode_audio
from tests.helpers.server import RunningServer, running_server, sdk_client
from tests.helpers.settings import make_settings
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.slow

ADMIN_KEY = "sg-admin-" + "k" * 40


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[RunningServer]:
    settings = make_settings(
        engines=["espeak"],
        pool={"workers": 1},
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": f"sqlite:///{tmp_path / 'store.db'}"},
    )
    with running_server(settings) as server:
        yield server


def test_a_key_speaks_through_espeak_and_its_usage_is_counted(keyed: RunningServer) -> None:
    wrong = sdk_client(keyed, "sk-wrong")
    with wrong, pytest.raises(openai.AuthenticationError):
        wrong.audio.speech.create(model="espeak", voice="alloy", input="Hi.")
    created = httpx.post(
        f"{keyed.url}/v1/admin/keys",
        json={"name": "e2e"},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    secret = created.json()["key"]
    with sdk_client(keyed, secret) as client:
        body = client.audio.speech.create(
            model="espeak", voice="alloy", input="Hello there.", response_format="wav"
        ).content
    audio = decode_audio(body, "wav")
    assert audio.duration > 0.5 and audio.rms > 0.01

    def total() -> dict[str, float]:
        response = httpx.get(
            f"{keyed.url}/v1/usage", headers={"Authorization": f"Bearer {secret}"}, timeout=30
        )
        found: dict[str, float] = response.json()["total"]
        return found

    # Usage is written in batches: the request shows once its batch is.
    wait_for(lambda: total()["requests"] == 1)
    assert total()["characters"] == len("Hello there.")
    assert total()["audio_seconds"] == pytest.approx(audio.duration, abs=0.1)
