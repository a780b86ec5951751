"""The router with fake providers: failover, breakers, shadow pairs, runtime control, reload."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from speechgate.errors import (
    EngineFailed,
    InvalidRequest,
    NoProviderAvailable,
    NotFound,
    QueueFull,
    UpstreamRejected,
    UpstreamUnavailable,
)
from speechgate.metering.tenancy import Caller
from speechgate.routing.breaker import BreakerState
from speechgate.routing.router import Router
from tests.helpers.clock import Clock
from tests.helpers.routing import AUDIO, BODY, FakeProvider, config, make_router
from tests.helpers.waiting import until

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fakes() -> dict[str, FakeProvider]:
    return {name: FakeProvider(name) for name in ("a", "b", "c")}


async def read(router: Router, key: str = "k") -> tuple[str, bytes]:
    answer = await router.open(BODY, key, "req_1")
    data = b"".join([chunk async for chunk in answer.body])
    return answer.headers["x-speechgate-provider"], data


async def test_serves_the_chosen_provider_and_names_it(fakes: dict[str, FakeProvider]) -> None:
    router = make_router(fakes, config())
    assert router.serves("tts-1") and router.serves("TTS_1") and not router.serves("espeak")
    assert await read(router) == ("a", AUDIO)


async def test_a_failure_before_audio_fails_over_and_counts(
    fakes: dict[str, FakeProvider],
) -> None:
    router = make_router(fakes, config())
    for error in (QueueFull(1), UpstreamUnavailable("down"), EngineFailed("boom")):
        fakes["a"].error = error
        assert await read(router) == ("b", AUDIO)
    assert router.state.providers["a"].breaker.state is BreakerState.OPEN
    # Open: "a" is not even tried any more.
    tried = fakes["a"].opened
    assert await read(router) == ("b", AUDIO)
    assert fakes["a"].opened == tried


async def test_client_errors_are_answered_not_failed_over(fakes: dict[str, FakeProvider]) -> None:
    router = make_router(fakes, config())
    for error in (
        InvalidRequest("bad voice", param="voice"),
        UpstreamRejected(400, "bad", error_type="invalid_request_error"),
    ):
        fakes["a"].error = error
        with pytest.raises(type(error)):
            await read(router)
    assert fakes["b"].opened == 0
    assert router.state.providers["a"].breaker.status().requests == 0


async def test_upstream_429_and_5xx_fail_over(fakes: dict[str, FakeProvider]) -> None:
    router = make_router(fakes, config())
    for status in (429, 500, 503):
        fakes["a"].error = UpstreamRejected(status, "busy", error_type="server_error")
        assert (await read(router))[0] == "b"


async def test_no_failover_once_audio_went_out(fakes: dict[str, FakeProvider]) -> None:
    router = make_router(fakes, config())
    fakes["a"].break_midway = True
    answer = await router.open(BODY, "k", "req_1")
    received = []
    with pytest.raises(UpstreamUnavailable):
        async for chunk in answer.body:
            received.append(chunk)
    assert received == [AUDIO[:100]] and fakes["b"].opened == 0
    assert router.state.providers["a"].breaker.status().failures == 1


async def test_every_provider_failing_gives_the_last_error(fakes: dict[str, FakeProvider]) -> None:
    router = make_router(fakes, config())
    fakes["a"].error = QueueFull(1)
    fakes["b"].error = UpstreamUnavailable("down")
    with pytest.raises(UpstreamUnavailable):
        await read(router)


async def test_every_breaker_open_gives_503(fakes: dict[str, FakeProvider]) -> None:
    clock = Clock()
    router = make_router(fakes, config(fallback=[]), clock=clock)
    fakes["a"].error = QueueFull(1)
    for _ in range(2):
        with pytest.raises(QueueFull):
            await read(router)
    with pytest.raises(NoProviderAvailable):
        await read(router)
    fakes["a"].error = None
    clock.now += 30  # half-open: the next requests are probes, and they succeed
    for _ in range(3):
        assert (await read(router))[0] == "a"
    assert router.state.providers["a"].breaker.state is BreakerState.CLOSED


async def test_runtime_control_applies_to_the_next_request(
    fakes: dict[str, FakeProvider],
) -> None:
    router = make_router(fakes, config(providers={"a": 100, "c": 0}))
    router.set_state(router.state.promoted("tts-1", "c"))
    assert router.state.routes["tts-1"].weights == {"a": 0, "c": 100}
    assert (await read(router))[0] == "c"
    router.set_state(router.state.with_enabled("c", False))
    assert (await read(router))[0] == "b"  # fallback first, then the 0 % ones
    router.set_state(router.state.with_weights("tts-1", {"a": 100}))
    assert (await read(router))[0] == "a"
    with pytest.raises(NotFound):
        router.state.with_weights("nope", {"a": 1})
    with pytest.raises(InvalidRequest):
        router.state.with_weights("tts-1", {"zzz": 1})
    with pytest.raises(NotFound):
        router.state.with_enabled("zzz", True)


async def test_shadow_pairs_compare_the_decoded_audio(fakes: dict[str, FakeProvider]) -> None:
    router = make_router(fakes, config(shadow={"provider": "c", "percent": 100}))
    await read(router)
    await until(lambda: len(router.shadow_log.recent) == 1)
    fakes["c"].audio = AUDIO[:-2]
    await read(router)
    await until(lambda: len(router.shadow_log.recent) == 2)
    same, shorter = router.shadow_log.recent
    assert (same.primary, same.shadow, same.identical, same.duration_difference) == (
        "a",
        "c",
        True,
        0.0,
    )
    assert shorter.identical is False
    assert shorter.duration_difference == pytest.approx(-1 / 24000)
    report = router.shadow_log.report()["routes"]["tts-1"]
    assert (report["pairs"], report["identical"], report["different"]) == (2, 1, 1)


async def test_a_failing_shadow_never_reaches_the_client(fakes: dict[str, FakeProvider]) -> None:
    router = make_router(fakes, config(shadow={"provider": "c", "percent": 100}))
    fakes["c"].error = UpstreamUnavailable("down")
    assert await read(router) == ("a", AUDIO)
    await until(lambda: len(router.shadow_log.recent) == 1)
    assert router.shadow_log.recent[0].shadow_error is not None


async def test_reload_closes_removed_providers_after_their_last_request(
    fakes: dict[str, FakeProvider], tmp_path: Path
) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text(
        "providers: {a: {kind: local}, b: {kind: local}}\nroutes: {tts-1: {providers: {a: 100}}}\n"
    )
    router = make_router(fakes, config(), path=path)
    answer = await router.open(BODY, "k", "req_1")  # in flight on "a"
    path.write_text("providers: {b: {kind: local}}\nroutes: {tts-1: {providers: {b: 100}}}\n")
    router.reload()
    assert (await read(router))[0] == "b"
    await asyncio.sleep(0)
    assert not fakes["a"].closed  # still streaming
    assert b"".join([chunk async for chunk in answer.body]) == AUDIO
    await until(lambda: fakes["a"].closed)
    path.write_text("providers: [")
    with pytest.raises(ValueError):
        router.reload()
    assert (await read(router))[0] == "b"
    await router.aclose()


async def test_the_asking_key_reaches_the_provider_and_its_shadow(
    fakes: dict[str, FakeProvider],
) -> None:
    router = make_router(fakes, config(shadow={"provider": "c", "percent": 100}))
    answer = await router.open(BODY, "k", "req_1", caller=Caller(owner="key_1"))
    assert b"".join([chunk async for chunk in answer.body]) == AUDIO
    await until(lambda: len(router.shadow_log.recent) == 1)
    assert fakes["a"].owners == fakes["c"].owners == ["key_1"]
