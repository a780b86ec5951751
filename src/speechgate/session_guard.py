"""What bounds an open streaming session, whatever front end holds it (the WebSocket route, a
Wyoming stream): its key is re-checked while it runs, and it has a maximum length."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

from speechgate.errors import (
    AuthenticationFailed,
    PermissionDenied,
    SessionExpired,
    SpeechgateError,
)
from speechgate.metering.tenancy import Principal

log = logging.getLogger(__name__)
T = TypeVar("T")


async def guard_session(
    check: Callable[[], Awaitable[None]], interval: float, max_seconds: float
) -> NoReturn:
    """Run `check` every `interval` seconds (of the event loop's clock) until it raises, and
    raise SessionExpired once `max_seconds` have passed. Ends only by raising (or being
    cancelled, when the session ends otherwise)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_seconds
    while True:
        await asyncio.sleep(min(interval, max(0.0, deadline - loop.time())))
        if loop.time() >= deadline:
            raise SessionExpired(
                f"The session reached its maximum length of {max_seconds:g} s and was closed; "
                "open a new session to go on."
            )
        await check()


async def check_key(
    lookup: Callable[[], Awaitable[Principal]], principal: Principal, model: str
) -> None:
    """Raise if the key a session was opened with may no longer speak with `model`: revoked,
    expired, or its models changed. `lookup`: who the session's credentials name now (the
    lookup a request makes, its cache included; AuthenticationFailed for no one)."""
    key = principal.key
    if key is None:
        return  # the admin, or anyone where no key is needed: nothing to take back
    try:
        current = (await lookup()).key
    except AuthenticationFailed:
        current = None
    except Exception:
        # The store failing revokes no one: the next check tries again.
        log.warning("could not re-check the key of a speech session", exc_info=True)
        return
    if current is None or current.id != key.id:
        raise AuthenticationFailed(
            "This session's API key was revoked or has expired; the session is closed."
        )
    if not current.allows_model(model):
        raise PermissionDenied(
            f"This session's API key is no longer allowed to use the model {model!r}; the "
            "session is closed.",
            param="model",
            code="model_not_allowed",
        )


async def until_stopped(work: Awaitable[T], guard: Awaitable[NoReturn]) -> T:
    """`work`'s result, unless `guard` raises first: then `work` is cancelled (a session's
    jobs with it) and the guard's error raised."""
    working = asyncio.ensure_future(work)
    guarding = asyncio.ensure_future(guard)
    try:
        await asyncio.wait((working, guarding), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (working, guarding):
            task.cancel()
        await asyncio.gather(working, guarding, return_exceptions=True)
    if working.done() and not working.cancelled():
        return working.result()
    error = guarding.exception() if not guarding.cancelled() else None
    raise error if error is not None else asyncio.CancelledError()


def stopped_status(error: SpeechgateError, audio_seconds: float) -> int:
    """The status to record for a session that `error` ended after `audio_seconds` of speech.
    One that had all the time it may have was served, and is billed; so is what a session
    spoke before its key stopped it (revoked, expired, quota spent): recorded as an error,
    those characters would go back to the key's quota."""
    stopped_by_key = error.status_code in (401, 403, 429) and audio_seconds > 0
    served = isinstance(error, SessionExpired) or stopped_by_key
    return 200 if served else error.status_code
