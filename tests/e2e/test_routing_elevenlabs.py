"""`kind: elevenlabs` routing: a front speechgate relays a route to another speechgate through
that one's ElevenLabs front end, and fails over to its own engine when the upstream dies."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest

from speechgate.settings import Settings
from tests.helpers.audio import decode_audio
from tests.helpers.relay import ADMIN_KEY, TEXT, Pair, engine_settings, speak
from tests.helpers.server import RunningServer, free_port, running_server, sdk_client
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.slow

# The upstream's admin key: it authenticates on every /v1 route, so a relayed request that
# arrives at all proves the provider sent it (as `xi-api-key`).
UPSTREAM_KEY = "sg-upstream-" + "x" * 40
ROUTES = """
providers:
  local: {{kind: local, model: espeak}}
  eleven:
    kind: elevenlabs
    base_url: {upstream}
    api_key: {key}
    models: {{relay: espeak}}
    voices: {{alloy: en-gb}}
    connect_timeout: 2
breaker: {{min_requests: 4, error_rate: 0.02, open_for: 0.2, probes: 2}}
routes:
  relay: {{providers: {{eleven: 100}}, fallback: [local]}}
"""


def upstream_settings() -> Settings:
    settings: Settings = engine_settings("espeak", auth={"mode": "keys", "admin_key": UPSTREAM_KEY})
    return settings


@contextmanager
def front_of(upstream_url: str, tmp_path: Path) -> Iterator[Pair]:
    routes = tmp_path / "routes.yaml"
    routes.write_text(ROUTES.format(upstream=upstream_url, key=UPSTREAM_KEY))
    with running_server(
        engine_settings("espeak", routing={"routes_file": routes}, auth={"admin_key": ADMIN_KEY})
    ) as front:
        yield Pair(front, upstream_url)


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningServer]:
    with running_server(upstream_settings()) as running:
        yield running


@pytest.fixture(scope="module")
def pair(upstream: RunningServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with front_of(upstream.url, tmp_path_factory.mktemp("routes")) as running:
        yield running


def test_relayed_through_the_upstreams_elevenlabs_api_with_mapped_model_voice_and_format(
    pair: Pair,
) -> None:
    with sdk_client(pair.front) as client:
        response = speak(client, "relay", "r-1")
        pcm = client.audio.speech.create(
            model="relay",
            voice="alloy",
            input=TEXT,
            response_format="pcm",
            extra_body={"sample_rate": 16000},
        )
    assert response.headers["x-speechgate-provider"] == "eleven"
    # The upstream's own headers, relayed: its engine, and the voice `alloy` was mapped to.
    assert response.headers["x-speechgate-engine"] == "espeak"
    assert response.headers["x-speechgate-voice"] == "en-gb"
    wav = decode_audio(response.content, "wav")  # asked as wav_24000
    assert wav.sample_rate == 24000 and wav.rms > 0.01 and 1.0 < wav.duration < 6.0
    narrow = decode_audio(pcm.content, "pcm", pcm_rate=16000)  # asked as pcm_16000
    assert narrow.duration == pytest.approx(wav.duration, abs=0.05) and narrow.rms > 0.01


def test_elevenlabs_clients_of_the_front_reach_the_elevenlabs_upstream_too(pair: Pair) -> None:
    # The SDK's client takes a third of a second of CPU to import: here, not at collection.
    from elevenlabs import ElevenLabs

    with httpx.Client(timeout=60) as http:
        client = ElevenLabs(base_url=pair.front.url, api_key="unused", httpx_client=http)
        with client.text_to_speech.with_raw_response.convert(
            voice_id="alloy", text=TEXT, model_id="relay", output_format="ulaw_8000"
        ) as response:
            assert response.headers["x-speechgate-provider"] == "eleven"
            audio = decode_audio(b"".join(response.data), "ulaw", pcm_rate=8000)
    assert audio.rms > 0.01 and 1.0 < audio.duration < 6.0


def test_what_elevenlabs_cannot_send_or_does_not_know_is_the_clients_error_not_a_failover(
    pair: Pair,
) -> None:
    with sdk_client(pair.front) as client:
        with pytest.raises(openai.BadRequestError) as flac:
            client.audio.speech.create(
                model="relay", voice="alloy", input=TEXT, response_format="flac"
            )
        with pytest.raises(openai.NotFoundError) as unknown:
            client.audio.speech.create(model="relay", voice="nobody", input=TEXT)
    assert flac.value.code == "unsupported_format" and "flac" in flac.value.message
    # The upstream's ElevenLabs error, relayed with its status and code.
    assert unknown.value.code == "voice_not_found"
    assert pair.breaker("eleven") == "closed"


def test_killing_the_elevenlabs_upstream_fails_over_to_the_local_engine_and_back(
    tmp_path: Path,
) -> None:
    port = free_port()
    with front_of(f"http://127.0.0.1:{port}", tmp_path) as pair, sdk_client(pair.front) as client:
        with running_server(upstream_settings(), port=port):
            assert speak(client, "relay", "k-0").headers["x-speechgate-provider"] == "eleven"

        # The upstream is gone: every request fails over to the local engine before any audio.
        for n in range(8):
            response = speak(client, "relay", f"k-{n}")
            assert response.status_code == 200
            assert response.headers["x-speechgate-provider"] == "local"
            assert decode_audio(response.content, "wav").rms > 0.01
        breaker = pair.admin("GET", "")["providers"]["eleven"]["breaker"]
        assert breaker["times_opened"] >= 1 and breaker["state"] != "closed"
        metrics = httpx.get(f"{pair.front.url}/metrics").text
        assert 'speechgate_route_failovers_total{provider="eleven",route="relay"}' in metrics

        with running_server(upstream_settings(), port=port):

            def probed() -> bool:
                for n in range(4):
                    assert speak(client, "relay", f"p-{n}").status_code == 200
                return pair.breaker("eleven") == "closed"

            wait_for(probed)
            assert speak(client, "relay", "k-9").headers["x-speechgate-provider"] == "eleven"
