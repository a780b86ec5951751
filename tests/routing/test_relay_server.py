"""Provider routing between two real speechgate servers on loopback: the front one routes
models to its own engine and to the other one (its upstream), through the openai SDK."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.helpers.audio import decode_audio
from tests.helpers.relay import ADMIN_KEY, TEXT, Pair, engine_settings, speak
from tests.helpers.server import RunningServer, free_port, running_server, sdk_client
from tests.helpers.waiting import wait_for

# Real servers and their processes are the subject: CI runs this module, the inner loop
# (`make test-fast`) does not.
pytestmark = pytest.mark.slow

UPSTREAM_KEY = "upstream-key-never-logged"
# Minutes of speech: more than the socket buffers between client and upstream can hold.
LONG = " ".join(["Section one explains the budget and the schedule in plain words."] * 60)
ROUTES = """
providers:
  local: {{kind: local, model: fake}}
  upstream:
    kind: remote
    base_url: {upstream}/v1
    api_key: {key}
    model: fake
    connect_timeout: 2
  upstream-espeak: {{kind: remote, base_url: {upstream}/v1, api_key: {key}, model: espeak}}
breaker: {{min_requests: 4, error_rate: 0.02, open_for: 0.2, probes: 2}}
routes:
  canary: {{providers: {{local: 50, upstream: 50}}, fallback: [local]}}
  relay: {{providers: {{upstream: 100}}}}
  relay-espeak: {{providers: {{upstream-espeak: 100}}}}
  shadowed:
    providers: {{local: 100}}
    shadow: {{provider: upstream, percent: 100}}
"""


@contextmanager
def front_of(upstream_url: str, tmp_path: Path) -> Iterator[Pair]:
    routes = tmp_path / "routes.yaml"
    routes.write_text(ROUTES.format(upstream=upstream_url, key=UPSTREAM_KEY))
    settings = engine_settings(routing={"routes_file": routes}, auth={"admin_key": ADMIN_KEY})
    with running_server(settings) as front:
        yield Pair(front, upstream_url)


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningServer]:
    # espeak-ng beside the fake engine, for the one test where a real engine is relayed.
    with running_server(engine_settings(engines=["fake", "espeak"])) as running:
        yield running


@pytest.fixture(scope="module")
def pair(upstream: RunningServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with front_of(upstream.url, tmp_path_factory.mktemp("routes")) as running:
        yield running


def test_streamed_pass_through_delivers_first_audio_before_the_upstream_finishes(
    pair: Pair, upstream: RunningServer
) -> None:
    pool = upstream.runtime.pools["fake"]
    with (
        sdk_client(pair.front) as client,
        client.audio.speech.with_streaming_response.create(
            model="relay",
            voice="alloy",
            input=LONG,
            response_format="pcm",
            extra_body={"sample_rate": 48000},  # ~25 MB: far beyond what buffers could hold
        ) as response,
    ):
        assert response.headers["x-speechgate-provider"] == "upstream"
        assert response.headers["x-speechgate-engine"] == "fake"  # the upstream's, relayed
        chunks = response.iter_bytes()
        first = next(chunks)
        assert first
        # The client holds its first audio while the upstream's job is still running: the
        # relay forwarded it as it came instead of waiting for the whole clip.
        assert pool.stats().in_flight == 1
        body = first + b"".join(chunks)
    wait_for(lambda: pool.stats().in_flight == 0)
    audio = decode_audio(body, "pcm", pcm_rate=48000)
    assert audio.duration > 60 and audio.rms > 0.01


def test_relayed_audio_is_speech_as_long_as_the_upstreams_own(
    pair: Pair, upstream: RunningServer
) -> None:
    with sdk_client(pair.front) as front, sdk_client(upstream) as direct:
        relayed = decode_audio(speak(front, "relay", "id-1").content, "wav")
        own = decode_audio(speak(direct, "fake", "id-1").content, "wav")
    assert relayed.sample_rate == own.sample_rate == 24000
    assert relayed.duration == pytest.approx(own.duration, rel=0.01)
    assert relayed.rms > 0.01


def test_upstream_client_errors_reach_the_client_unchanged(pair: Pair) -> None:
    with sdk_client(pair.front) as client, pytest.raises(openai.BadRequestError) as caught:
        client.audio.speech.create(model="relay", voice="nobody", input=TEXT)
    assert caught.value.code == "voice_not_found"
    assert pair.breaker("upstream") == "closed"


def test_shadow_comparisons_report_identical_pcm_for_a_deterministic_engine(pair: Pair) -> None:
    # The fake engine is deterministic: the same request gives the same PCM on both sides. No
    # other test of the module's pair uses the shadowed route: its counts start at zero.
    with sdk_client(pair.front) as client:
        for n in range(3):
            response = speak(client, "shadowed", f"s-{n}", f"{TEXT} Take {n}.", "en-high")
            assert response.headers["x-speechgate-provider"] == "local"
            assert decode_audio(response.content, "wav").rms > 0.01
    wait_for(lambda: pair.admin("GET", "/shadow")["routes"].get("shadowed", {}).get("pairs") == 3)
    report = pair.admin("GET", "/shadow")
    metrics = httpx.get(f"{pair.front.url}/metrics").text
    assert report["routes"]["shadowed"]["identical"] == 3
    latest = report["recent"][-1]
    assert (latest["primary"], latest["shadow"], latest["identical"]) == ("local", "upstream", True)
    assert latest["duration_difference"] == 0.0 and latest["primary_audio_seconds"] > 1
    assert latest["shadow_ttfa"] > 0 and latest["shadow_elapsed"] >= latest["shadow_ttfa"]
    assert 'speechgate_shadow_pairs_total{result="identical",route="shadowed"} 3.0' in metrics


def test_admin_routes_need_the_admin_key(pair: Pair) -> None:
    url = f"{pair.front.url}/v1/admin/routing"
    assert httpx.get(url).status_code == 401
    wrong = httpx.get(url, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "admin_key_required"
    assert UPSTREAM_KEY not in pair.admin("GET", "").__repr__()


def test_weights_change_for_the_next_request_and_show_in_metrics(pair: Pair) -> None:
    with sdk_client(pair.front) as client:
        try:
            pair.admin("POST", "/routes/canary/promote", json={"provider": "upstream"})
            served = {
                speak(client, "canary", f"w-{n}").headers["x-speechgate-provider"] for n in range(6)
            }
            assert served == {"upstream"}
            metrics = httpx.get(f"{pair.front.url}/metrics").text
            assert 'speechgate_route_weight{provider="local",route="canary"} 0.0' in metrics
            pair.admin("POST", "/providers/upstream/disable")
            assert speak(client, "canary", "w-0").headers["x-speechgate-provider"] == "local"
        finally:
            pair.admin("POST", "/reload")  # back to the file's 50/50, everything enabled
    state = pair.admin("GET", "")
    assert state["routes"]["canary"]["weights"] == {"local": 50, "upstream": 50}
    assert state["providers"]["upstream"]["enabled"]


def test_killing_the_upstream_mid_canary_fails_nothing_and_opens_then_closes_the_breaker(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    settings = engine_settings()
    ids = [f"user-{n}" for n in range(12)]
    with front_of(f"http://127.0.0.1:{port}", tmp_path) as pair, sdk_client(pair.front) as client:
        with running_server(settings, port=port):
            served = [speak(client, "canary", key).headers["x-speechgate-provider"] for key in ids]
        assert set(served) == {"local", "upstream"}  # a 50/50 split of these ids

        # The upstream is gone: its requests fail over to the local engine before any audio.
        for key in ids * 2:
            response = speak(client, "canary", key)
            assert response.status_code == 200
            assert response.headers["x-speechgate-provider"] == "local"
            assert decode_audio(response.content, "wav").rms > 0.01
        # Opened (and, `open_for` later, half-open: nothing but probes goes there).
        breaker = pair.admin("GET", "")["providers"]["upstream"]["breaker"]
        assert breaker["times_opened"] >= 1 and breaker["state"] != "closed"
        metrics = httpx.get(f"{pair.front.url}/metrics").text
        assert (
            'speechgate_provider_breaker_state{provider="upstream",state="closed"} 0.0' in metrics
        )
        assert 'speechgate_route_failovers_total{provider="upstream",route="canary"}' in metrics

        # Back where it was: after `open_for`, probes go through and close the breaker.
        with running_server(settings, port=port):

            def probed() -> bool:
                for key in ids:
                    assert speak(client, "canary", key).status_code == 200
                return pair.breaker("upstream") == "closed"

            wait_for(probed)
            served = [speak(client, "canary", key).headers["x-speechgate-provider"] for key in ids]
            assert set(served) == {"local", "upstream"}
    assert "could not be reached" in caplog.text and UPSTREAM_KEY not in caplog.text


def test_usage_records_name_the_provider_that_answered(pair: Pair) -> None:
    def relay_line() -> dict[str, Any]:
        usage = httpx.get(
            f"{pair.front.url}/v1/usage", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        ).json()
        lines = [line for line in usage["lines"] if line["model"] == "relay"]
        by_provider = {line["provider"]: line for line in lines}
        return by_provider.get("upstream", {"requests": 0, "audio_seconds": 0.0})

    before = relay_line()
    with sdk_client(pair.front) as client:
        audio = decode_audio(speak(client, "relay", "usage-1").content, "wav")
    after = relay_line()
    assert after["requests"] == before["requests"] + 1
    # Counted from the relayed WAV's length (its 44-byte header is 1 ms at most).
    seconds = after["audio_seconds"] - before["audio_seconds"]
    assert seconds == pytest.approx(audio.duration, abs=0.002)


@pytest.mark.parametrize(
    ("fmt", "codec", "rate", "content_type"),
    [("ulaw_8000", "ulaw", 8000, "audio/basic"), ("pcm_16000", "pcm", 16000, "audio/pcm")],
)
def test_a_named_format_is_relayed_and_metered_at_its_own_rate(
    pair: Pair, fmt: str, codec: str, rate: int, content_type: str
) -> None:
    def relayed_seconds() -> float:
        usage = httpx.get(
            f"{pair.front.url}/v1/usage", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        ).json()
        return sum(
            line["audio_seconds"]
            for line in usage["lines"]
            if line["model"] == "relay" and line["provider"] == "upstream"
        )

    before = relayed_seconds()
    with sdk_client(pair.front) as client:
        response = client.audio.speech.with_raw_response.create(
            model="relay",
            voice="alloy",
            input=TEXT,
            response_format=fmt,  # type: ignore[arg-type]
            extra_headers={"x-request-id": f"named-{fmt}"},
        )
    assert response.headers["content-type"] == content_type
    audio = decode_audio(response.content, codec, pcm_rate=rate)
    assert audio.duration > 1 and audio.rms > 0.01
    # Counted from the body's length at the name's rate and sample width, not 16-bit 24 kHz.
    assert relayed_seconds() - before == pytest.approx(audio.duration, abs=0.002)


def test_a_real_engine_is_relayed_as_it_speaks_directly(
    pair: Pair, upstream: RunningServer
) -> None:
    """The relay end to end with espeak-ng speaking upstream (the rest of this module uses the
    fake engine: the routing is the subject, not what speaks)."""
    with sdk_client(pair.front) as front, sdk_client(upstream) as direct:
        relayed = speak(front, "relay-espeak", "id-1", voice="en-us")
        own = decode_audio(speak(direct, "espeak", "id-1", voice="en-us").content, "wav")
    assert relayed.headers["x-speechgate-provider"] == "upstream-espeak"
    assert relayed.headers["x-speechgate-engine"] == "espeak"
    audio = decode_audio(relayed.content, "wav")
    assert audio.duration == pytest.approx(own.duration, rel=0.01)
    assert audio.rms > 0.01
