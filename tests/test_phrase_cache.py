"""The phrase cache: its bound, its keys, and a repeated request answered from it through the
API (in-process, the fake engine)."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from speechgate.api.app import create_app
from speechgate.api.state import started
from speechgate.audio.formats import AudioFormat, parse_format
from speechgate.audio.pcm import PcmChunk
from speechgate.catalog import Catalog
from speechgate.engines.base import EngineInfo, Voice
from speechgate.phrase_cache import PhraseCache, PhraseKey, Rendition, encode_cached
from speechgate.phrase_store import PhraseStore
from speechgate.pipeline import EncodedChunk, OutputSpec
from speechgate.service import SpeechService
from speechgate.speech_request import SpeechRequest
from tests.helpers.server import running_server
from tests.helpers.settings import fake_settings, merged
from tests.helpers.tenancy import ADMIN_KEY, new_key, spy_usage
from tests.helpers.waiting import wait_for

RATE = 16000


def key(text: str, voice: str = "v", voice_id: str = "v", owner: str | None = None) -> PhraseKey:
    return PhraseKey("fake", voice, voice_id, owner, text, 1.0, None, None, None)


def pcm(seconds: float, value: int = 1000) -> PcmChunk:
    return PcmChunk(np.full(round(seconds * RATE), value, np.int16), RATE)


def test_the_cache_stays_within_its_bound_under_ten_thousand_distinct_prompts() -> None:
    cache = PhraseCache(max_bytes=1_000_000)
    for index in range(10_000):
        cache.put(key(f"prompt {index}"), pcm(0.25 + (index % 7) * 0.1))
        assert cache.size <= cache.max_bytes
    assert 0 < len(cache) < 10_000
    assert cache.size == sum(entry.size for entry in cache._entries.values())
    # The most recent are there, the first long gone.
    assert cache.get(key("prompt 9999")) is not None
    assert cache.get(key("prompt 0")) is None


def test_renditions_share_the_bound_and_go_with_their_voice() -> None:
    output = OutputSpec(AudioFormat.MP3, 24000)
    cache = PhraseCache(max_bytes=100_000)
    clone = key("hi", "/voices/voice_1.safetensors", "voice_1", "alice")
    cache.put(clone, pcm(0.1))
    encoded = Rendition.of([EncodedChunk(b"", 0.1), EncodedChunk(b"x" * 500, 0.2)])
    assert encoded.chunks == (EncodedChunk(b"x" * 500, pytest.approx(0.3)),)
    assert cache.put_rendition(clone, output, encoded)
    assert cache.rendition(clone, output) is encoded
    assert cache.rendition(dataclasses.replace(clone, owner="bob"), output) is None
    assert cache.rendition(clone, OutputSpec(AudioFormat.MP3, 16000)) is None
    assert cache.size == pcm(0.1).samples.nbytes + 500 and len(cache) == 1
    for index in range(200):  # renditions of other phrases push the oldest out
        cache.put_rendition(key(f"p{index}"), output, Rendition((EncodedChunk(b"y" * 900, 1),)))
        assert cache.size <= cache.max_bytes
    assert cache.rendition(clone, output) is None
    cache.put_rendition(clone, output, encoded)
    assert cache.forget_voice("voice_1") == 1
    assert cache.rendition(clone, output) is None


def test_the_least_recently_used_goes_first() -> None:
    cache = PhraseCache(max_bytes=3 * 8000 * 2)
    for text in "abc":
        cache.put(key(text), pcm(0.5))
    assert cache.get(key("a")) is not None  # used: "b" is now the oldest
    cache.put(key("d"), pcm(0.5))
    assert [cache.get(key(t)) is not None for t in "abcd"] == [True, False, True, True]


def test_a_cache_full_of_pinned_entries_keeps_them_and_refuses_more() -> None:
    cache = PhraseCache(max_bytes=2 * 8000 * 2)
    assert cache.put(key("one"), pcm(0.5), pinned=True)
    assert cache.put(key("two"), pcm(0.5), pinned=True)
    assert not cache.put(key("three"), pcm(0.5))
    assert not cache.put(key("four"), pcm(0.5), pinned=True)
    assert cache.get(key("one")) is not None and cache.get(key("two")) is not None
    assert cache.size == cache.pinned_size == cache.max_bytes


def test_an_entry_larger_than_the_cache_is_not_kept() -> None:
    cache = PhraseCache(max_bytes=1000)
    assert not cache.put(key("long"), pcm(1.0))
    assert len(cache) == 0 and cache.size == 0


def test_forgetting_a_voice_drops_its_entries_only() -> None:
    cache = PhraseCache(max_bytes=1_000_000)
    cache.put(key("hi", "/voices/voice_1.safetensors", "voice_1", "alice"), pcm(0.1))
    cache.put(key("bye", "/voices/voice_1.safetensors", "voice_1", "alice"), pcm(0.1))
    cache.put(key("hi"), pcm(0.1))
    assert cache.forget_voice("voice_1") == 2
    assert len(cache) == 1 and cache.get(key("hi")) is not None
    assert cache.size == pcm(0.1).samples.nbytes


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["pcm", "wav", "mp3", "opus"])
async def test_cached_pcm_encodes_in_any_format_a_short_chunk_first(name: str) -> None:
    audio = pcm(3.0)
    fmt = parse_format(name)
    chunks = [c async for c in encode_cached(audio, OutputSpec(fmt.format, 24000))]
    assert sum(c.audio_seconds for c in chunks) == pytest.approx(3.0)
    assert chunks[0].audio_seconds <= 0.25 + 1e-9
    assert b"".join(c.data for c in chunks)
    if fmt.format is AudioFormat.PCM:  # resampled to 24 kHz: 1.5 samples a sample
        assert len(b"".join(c.data for c in chunks)) == round(3.0 * 24000) * 2


def _service(**overrides: object) -> SpeechService:
    voices = (Voice("a", "a"),)
    catalog = Catalog(
        {
            "fake": EngineInfo("fake", RATE, False, voices),
            "pocket": EngineInfo(
                "pocket", 24000, False, voices, supports_seed=True, samples_randomly=True
            ),
        },
        {},
        {},
    )
    settings = fake_settings(**merged({"phrase_cache": {"max_bytes": 1_000_000}}, overrides))
    return SpeechService(settings, catalog, pools={})


def _plan(service: SpeechService, model: str = "fake", seed: int | None = None) -> object:
    return service.plan(
        SpeechRequest(model=model, voice="a", format=parse_format("mp3"), text="Hi.", seed=seed)
    )


def test_a_stored_voice_is_cached_per_owner_a_built_in_one_for_all() -> None:
    service = _service()
    built_in = _plan(service)
    assert service.phrase_key(built_in) is not None  # type: ignore[arg-type]
    # A clone: the engine speaks a state file, the client named the library's id.
    clone = dataclasses.replace(
        built_in,  # type: ignore[type-var]
        request=dataclasses.replace(built_in.request, voice="/data/voices/voice_1.safetensors"),  # type: ignore[attr-defined]
        voice_id="voice_1",
    )
    alice = service.phrase_key(dataclasses.replace(clone, owner="alice"))
    bob = service.phrase_key(dataclasses.replace(clone, owner="bob"))
    assert alice is not None and bob is not None and alice != bob
    service.phrases.put(alice, pcm(0.1))
    assert service.phrases.get(bob) is None


def test_an_engine_that_samples_randomly_is_cached_with_a_seed_or_by_choice() -> None:
    service = _service()
    assert service.phrase_key(_plan(service, "pocket")) is None  # type: ignore[arg-type]
    assert service.phrase_key(_plan(service, "pocket", seed=7)) is not None  # type: ignore[arg-type]
    chosen = _service(phrase_cache={"random": True})
    assert chosen.phrase_key(_plan(chosen, "pocket")) is not None  # type: ignore[arg-type]
    off = _service(phrase_cache={"max_bytes": 0})
    assert off.phrase_key(_plan(off)) is None  # type: ignore[arg-type]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def app_client() -> AsyncIterator[tuple[httpx.AsyncClient, object]]:
    settings = fake_settings(phrase_cache={"max_bytes": 1_000_000, "preload": ["Welcome back."]})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client, started(app)


async def _say(client: httpx.AsyncClient, text: str, fmt: str = "pcm") -> httpx.Response:
    body = {"model": "fake", "voice": "en-high", "input": text, "response_format": fmt}
    response = await client.post("/v1/audio/speech", json=body)
    assert response.status_code == 200, response.text
    return response


@pytest.mark.anyio
async def test_a_repeated_request_is_a_hit_with_the_same_audio_and_no_job(
    app_client: tuple[httpx.AsyncClient, object],
) -> None:
    client, state = app_client
    pool = state.runtime.pools["fake"]  # type: ignore[attr-defined]
    first = await _say(client, "One moment, please.")
    assert first.headers["x-speechgate-cache"] == "miss"
    jobs = pool.stats().jobs["completed"]
    again = await _say(client, "One moment, please.")
    assert again.headers["x-speechgate-cache"] == "hit"
    assert again.content == first.content
    for fmt in ("mp3", "opus", "wav"):
        other = await _say(client, "One moment, please.", fmt)
        assert other.headers["x-speechgate-cache"] == "hit" and other.content
    assert pool.stats().jobs["completed"] == jobs  # no worker spoke the hits
    metrics = (await client.get("/metrics")).text
    assert 'speechgate_phrase_cache_total{engine="fake",outcome="hit"} 4.0' in metrics


@pytest.mark.anyio
async def test_a_hit_in_a_format_asked_before_runs_no_encoder(
    app_client: tuple[httpx.AsyncClient, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    import speechgate.phrase_cache

    encoders = []

    class Counted(speechgate.phrase_cache.StreamEncoder):
        def __init__(self, *args: object, **kwargs: object) -> None:
            encoders.append(args)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(speechgate.phrase_cache, "StreamEncoder", Counted)
    client, _ = app_client
    await _say(client, "Hold on.")  # the miss: rendered and encoded by the worker
    for fmt in ("mp3", "opus", "pcm"):
        first = await _say(client, "Hold on.", fmt)
        again = await _say(client, "Hold on.", fmt)
        assert first.headers["x-speechgate-cache"] == again.headers["x-speechgate-cache"] == "hit"
        assert again.content == first.content
    # The first hit in mp3 and in opus only: pcm's bytes are the miss's own.
    assert len(encoders) == 2


@pytest.mark.anyio
async def test_a_hit_streams_as_events_too(app_client: tuple[httpx.AsyncClient, object]) -> None:
    client, _ = app_client
    body = {"model": "fake", "voice": "en-high", "input": "Got it.", "stream_format": "sse"}
    answers = []
    for _ in range(2):
        response = await client.post("/v1/audio/speech", json={**body, "response_format": "pcm"})
        assert response.status_code == 200, response.text
        events = [json.loads(line[6:]) for line in response.text.splitlines() if line]
        audio = b"".join(base64.b64decode(e["audio"]) for e in events if "audio" in e)
        answers.append((response.headers["x-speechgate-cache"], audio, events[-1]["usage"]))
    (miss, first, usage), (hit, again, usage_again) = answers
    assert (miss, hit) == ("miss", "hit")
    assert again == first and first and usage_again == usage


@pytest.mark.anyio
async def test_a_preloaded_phrase_is_a_hit_at_once(
    app_client: tuple[httpx.AsyncClient, object],
) -> None:
    client, _ = app_client
    response = await _say(client, "Welcome back.")
    assert response.headers["x-speechgate-cache"] == "hit"


@pytest.mark.anyio
async def test_deleting_a_voice_clears_its_phrases(
    app_client: tuple[httpx.AsyncClient, object],
) -> None:
    client, state = app_client
    runtime = state.runtime  # type: ignore[attr-defined]
    stored = runtime.voices.library.add("Ann", "fake", b"state", 3.0)
    cached = key("Hi.", str(runtime.voices.library.state_path(stored)), stored.id)
    runtime.service.phrases.put(cached, pcm(0.1))
    response = await client.delete(f"/v1/audio/voices/{stored.id}")
    assert response.status_code == 200, response.text
    assert runtime.service.phrases.get(cached) is None


class _Pool:
    def __init__(self) -> None:
        from speechgate.workers.admission import ServiceTimes

        self.service_times = ServiceTimes()


def test_streamed_text_is_cut_for_the_engine_s_speed_measured_or_estimated() -> None:
    from speechgate.text.segment import SegmentLimits

    voices = (Voice("a", "a"),)
    catalog = Catalog(
        {
            "slow": EngineInfo("slow", RATE, False, voices, characters_per_second=15.0),
            "fake": EngineInfo("fake", RATE, False, voices),
        },
        {},
        {},
    )
    pools = {"slow": _Pool(), "fake": _Pool()}
    service = SpeechService(fake_settings(), catalog, pools=pools)  # type: ignore[arg-type]
    assert service.segment_limits("fake") == SegmentLimits()
    assert service.segment_limits("slow") == SegmentLimits.for_speed(15.0)
    pools["slow"].service_times.record(1.0, audio_seconds=1.0, characters=300)
    assert service.segment_limits("slow") == SegmentLimits.for_speed(300.0)


def test_the_store_keeps_to_its_bound_and_ignores_an_entry_cut_short(tmp_path: Path) -> None:
    store = PhraseStore(tmp_path, max_bytes=3 * 8000 * 2)
    for index in range(5):
        store.save(f"d{index}", pcm(0.5, index), "voice_1" if index % 2 else "alloy")
        assert store.size <= store.max_bytes
    assert len(list(tmp_path.glob("*/*.pcm"))) == 3
    (tmp_path / "crash").mkdir()
    (tmp_path / "crash" / "d9.pcm").write_bytes(b"\0\0" * 10)  # its .json never written
    again = PhraseStore(tmp_path, max_bytes=2 * 8000 * 2)
    loaded = again.load()
    # The newest first, as many as the bound holds; the one left over is removed.
    assert [entry.digest for entry in loaded] == ["d4", "d3"]
    assert loaded[0].pcm.sample_rate == RATE and int(loaded[1].pcm.samples[0]) == 3
    assert len(list(tmp_path.glob("*/*.json"))) == 2
    assert again.forget_voice("voice_1") == 1
    assert [entry.digest for entry in PhraseStore(tmp_path, 10**6).load()] == ["d4"]


def test_a_phrase_s_digest_changes_with_its_voice_s_state_file(tmp_path: Path) -> None:
    service = _service(phrase_cache={"persist": True}, data_dir=tmp_path)
    state = tmp_path / "voice_1.safetensors"
    state.write_bytes(b"one")
    clone = key("Hi.", str(state), "voice_1", "alice")
    before = service._digest(clone)
    assert service._digest(clone) == before
    assert service._digest(key("Hi.")) != before
    state.write_bytes(b"another")  # the voice replaced: its audio is no longer found
    assert service._digest(clone) != before


@pytest.mark.anyio
async def test_a_restarted_server_answers_a_hit_from_disk(tmp_path: Path) -> None:
    phrase_cache = {"max_bytes": 1_000_000, "persist": True}
    settings = fake_settings(phrase_cache=phrase_cache, data_dir=tmp_path)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            first = await _say(client, "Please hold.")
            assert first.headers["x-speechgate-cache"] == "miss"
    assert list((tmp_path / "phrase-cache").glob("*/*.json"))
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        pool = started(app).runtime.pools["fake"]
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            again = await _say(client, "Please hold.")
            assert again.headers["x-speechgate-cache"] == "hit"
            assert again.content == first.content
            other = await _say(client, "Please hold!")
            assert other.headers["x-speechgate-cache"] == "miss"
        assert pool.stats().jobs["completed"] == 1  # the other text only


def test_hits_are_metered_for_the_key_that_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    settings = fake_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": url},
        phrase_cache={"max_bytes": 1_000_000},
    )
    with running_server(settings) as server:
        _, secret = new_key(server)
        records = spy_usage(server, monkeypatch)
        headers = {"Authorization": f"Bearer {secret}"}
        outcomes = []
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
            for fmt in ("pcm", "pcm", "mp3"):
                body = {"model": "fake", "voice": "alloy", "input": "Hi there."}
                response = client.post("/v1/audio/speech", json={**body, "response_format": fmt})
                assert response.status_code == 200, response.text
                outcomes.append(response.headers["x-speechgate-cache"])
        assert outcomes == ["miss", "hit", "hit"]
        wait_for(lambda: len(records) == 3)
    assert [(r.status, r.characters) for r in records] == [(200, 9)] * 3
    assert records[1].audio_seconds == pytest.approx(records[0].audio_seconds)
    assert records[2].audio_seconds == pytest.approx(records[0].audio_seconds, abs=0.01)
