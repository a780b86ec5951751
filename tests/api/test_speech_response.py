"""A speech response ends its answer however the response ends: streamed to the end, or
cancelled before its body was ever iterated (the client gone between the headers and the first
audio, or the task cancelled). The router's bookkeeping and the stream's end run once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
from starlette.types import Message

from speechgate.api.http import AnswerResponse, unless_disconnected
from speechgate.routing.breaker import BreakerState
from speechgate.routing.providers import Answer
from speechgate.service import SpeechStream
from tests.helpers.clock import Clock
from tests.helpers.routing import BODY, FakeProvider, config, make_router
from tests.helpers.waiting import until

pytestmark = pytest.mark.anyio

SCOPE = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.0"}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def gone() -> Message:
    return {"type": "http.disconnect"}


async def stuck(message: Message) -> None:
    # A send that never completes: the disconnect wins before the body starts.
    await asyncio.Event().wait()


async def refused(message: Message) -> None:
    raise OSError("connection reset")


async def never() -> Message:
    await asyncio.Event().wait()
    raise AssertionError


async def test_a_response_cut_before_its_body_frees_the_breaker_probe_and_in_flight(
    tmp_path: Path,
) -> None:
    fakes = {name: FakeProvider(name) for name in ("a", "b", "c")}
    clock = Clock()
    routes = config(fallback=[])  # three probes at a time close a half-open breaker
    path = tmp_path / "routes.yaml"
    router = make_router(fakes, routes, clock=clock, path=path)
    breaker = router.state.providers["a"].breaker

    def state() -> BreakerState:
        return breaker.state

    fakes["a"].error = RuntimeError("down")
    for _ in range(2):
        with pytest.raises(RuntimeError):
            await router.open(BODY, "k", "req")
    assert state() is BreakerState.OPEN
    fakes["a"].error = None
    clock.now += 30

    # Three probes, each cut before its first body iteration in another way.
    for receive, send, cancel in (
        (gone, stuck, False),
        (never, refused, False),
        (never, stuck, True),
    ):
        assert state() is BreakerState.HALF_OPEN
        answer = await router.open(BODY, "k", "req")  # takes a probe slot
        task = asyncio.ensure_future(AnswerResponse(answer)(SCOPE, receive, send))
        if cancel:
            await asyncio.sleep(0)
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert fakes["a"].answers_closed == fakes["a"].answered

    # Each probe ended neutral and gave its slot back: the next three get through and decide.
    for _ in range(3):
        answer = await router.open(BODY, "k", "req")
        assert b"".join([chunk async for chunk in answer.body]) == fakes["a"].audio
    assert state() is BreakerState.CLOSED

    # Nothing is left in flight on "a": a reload that drops it closes it at once.
    path.write_text("providers: {b: {kind: local}}\nroutes: {tts-1: {providers: {b: 100}}}\n")
    router.reload()
    await until(lambda: fakes["a"].closed)
    await router.aclose()


async def test_a_local_stream_never_iterated_ends_once_when_its_response_is_cut() -> None:
    ended: list[bool] = []
    closed = []

    async def rest() -> AsyncGenerator[object]:
        try:
            yield None
        finally:
            closed.append(True)

    chunks = rest()
    await anext(chunks)  # a running job: its first audio came out
    stream = SpeechStream(None, chunks, 0.0, lambda: 0.0, lambda _, ok: ended.append(ok))  # type: ignore[arg-type]
    answer = Answer("audio/mpeg", stream.chunks(), stream, {}, on_close=stream.aclose)
    await AnswerResponse(answer)(SCOPE, gone, stuck)
    assert ended == [False] and closed == [True]
    await answer.aclose()
    assert ended == [False]


class Waiting:
    """A request whose client stays: `receive` never answers (the body was read)."""

    receive = staticmethod(never)


async def test_a_cancelled_wait_for_first_audio_takes_the_work_with_it() -> None:
    fakes = {name: FakeProvider(name) for name in ("a", "b", "c")}
    router = make_router(fakes, config(fallback=[]))
    entered, ready = asyncio.Event(), asyncio.Event()
    opened = FakeProvider.open

    async def slow_open(
        self: FakeProvider, body: object, request_id: str, owner: str | None
    ) -> Answer:
        entered.set()
        await ready.wait()
        return await opened(self, body, request_id, owner)  # type: ignore[arg-type]

    fakes["a"].open = slow_open.__get__(fakes["a"])  # type: ignore[method-assign]
    wait = asyncio.ensure_future(
        unless_disconnected(Waiting(), router.open(BODY, "k", "req"), Answer.aclose)  # type: ignore[arg-type]
    )
    await entered.wait()
    wait.cancel()
    await asyncio.gather(wait, return_exceptions=True)
    ready.set()
    await asyncio.sleep(0)  # an orphaned open would finish now
    # The router saw its request cancelled (neutral, not in flight), instead of opening an
    # answer nobody would read.
    assert fakes["a"].answered == 0
    assert router.state.providers["a"].breaker.status().requests == 0

    # Finished at the moment the wait was cancelled: the answer is closed, not dropped.
    finished: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
    wait = asyncio.ensure_future(unless_disconnected(Waiting(), finished, Answer.aclose))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # waiting for it
    finished.set_result(await router.open(BODY, "k", "req"))
    wait.cancel()
    await asyncio.gather(wait, return_exceptions=True)
    assert fakes["a"].answers_closed == fakes["a"].answered == 1
