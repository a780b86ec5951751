"""`auto_pull` over Wyoming: a voice known but not installed is pulled (from a fake hub) and
spoken, as over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeVoice

from speechgate.voices.installed import find
from tests.helpers.hub import fake_hub, publish_piper_voices
from tests.helpers.server import RunningServer, free_port, running_server
from tests.helpers.settings import make_settings, share_engine_data
from tests.helpers.wyoming import Audio, read_audio

pytestmark = pytest.mark.slow

# A generic name of piper's alias table, and the voice it means.
ALIAS, KEY = "es_es_male", "es_ES-davefx-medium"


@pytest.fixture(scope="module")
def pulling(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, int]]:
    port = free_port()
    with fake_hub() as hub:
        publish_piper_voices(hub, [KEY])
        data_dir = tmp_path_factory.mktemp("wyoming-autopull")
        # Its own models; joe, which its worker loads at start, from the run's optimized copy.
        share_engine_data(data_dir)
        settings = make_settings(
            engines=["piper"],
            pool={"workers": 1},
            hub={"auto_pull": True, "endpoint": hub.url},
            data_dir=data_dir,
            wyoming={"uri": f"tcp://127.0.0.1:{port}"},
        )
        with running_server(settings) as server:
            yield server, port


def test_a_known_voice_is_pulled_then_spoken(pulling: tuple[RunningServer, int]) -> None:
    server, port = pulling
    assert find(server.runtime.settings.models_dir, "piper", KEY) is None

    async def go() -> Audio:
        async with AsyncTcpClient("127.0.0.1", port) as connection:
            voice = SynthesizeVoice(name=ALIAS)
            await connection.write_event(Synthesize(text="Pulled first.", voice=voice).event())
            return await read_audio(connection)

    audio = asyncio.run(go())
    assert find(server.runtime.settings.models_dir, "piper", KEY) is not None
    assert audio.duration > 0.3 and audio.rms > 0.02
