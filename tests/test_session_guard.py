"""The bounds of an open streaming session, whatever front end holds it: the key re-checked
every interval, a maximum length, and the session's work stopped when either ends it."""

from __future__ import annotations

import asyncio

import pytest

from speechgate.errors import AuthenticationFailed, SessionExpired
from speechgate.session_guard import guard_session, until_stopped
from tests.helpers.clock import Clock, run_on, settle


def test_the_guard_checks_every_interval_and_expires_at_the_maximum() -> None:
    clock = Clock()
    checks: list[float] = []

    async def check() -> None:
        checks.append(clock())

    async def scenario() -> None:
        guard = asyncio.ensure_future(guard_session(check, interval=2, max_seconds=7))
        for _ in range(6):
            await settle()
            clock.advance(1)
        await settle()
        assert checks == [2, 4, 6] and not guard.done()
        clock.advance(1)
        await settle()
        with pytest.raises(SessionExpired):
            guard.result()
        assert checks == [2, 4, 6]

    run_on(clock, scenario)


def test_the_guard_raises_what_the_check_raises() -> None:
    clock = Clock()

    async def check() -> None:
        if clock() >= 3:
            raise AuthenticationFailed("revoked")

    async def scenario() -> None:
        guard = asyncio.ensure_future(guard_session(check, interval=1, max_seconds=3600))
        for _ in range(3):
            await settle()
            clock.advance(1)
        await settle()
        with pytest.raises(AuthenticationFailed):
            guard.result()

    run_on(clock, scenario)


def test_a_guard_that_raises_stops_the_work_with_its_error() -> None:
    clock = Clock()
    stopped: list[bool] = []

    async def work() -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            stopped.append(True)
            raise
        return "done"

    async def check() -> None:
        if clock() >= 2:
            raise AuthenticationFailed("revoked")

    async def scenario() -> None:
        guarded = asyncio.ensure_future(
            until_stopped(work(), guard_session(check, interval=1, max_seconds=3600))
        )
        for _ in range(2):
            await settle()
            clock.advance(1)
        while not guarded.done():
            await settle()
        with pytest.raises(AuthenticationFailed):
            guarded.result()
        assert stopped == [True]

    run_on(clock, scenario)


def test_work_that_ends_first_ends_its_guard() -> None:
    clock = Clock()
    checks: list[float] = []

    async def check() -> None:
        checks.append(clock())

    async def work() -> str:
        await asyncio.sleep(1.5)
        return "done"

    async def scenario() -> None:
        guarded = asyncio.ensure_future(
            until_stopped(work(), guard_session(check, interval=1, max_seconds=3600))
        )
        for _ in range(8):
            await settle()
            clock.advance(0.5)
        await settle()
        assert guarded.result() == "done"
        assert checks == [1]

    run_on(clock, scenario)
