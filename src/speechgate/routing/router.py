"""Routes one speech request: choose, fail over, watch the stream, shadow it.

A request reads the routing state once. It tries the providers in `attempt_order`, skipping
those whose breaker is open, and moves on only when a provider fails before its first audio
(a 429, a 5xx, a timeout, a lost connection); a client error is the client's answer. Once
audio has gone out there is no second chance: a failure can only cut the stream short.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

from speechgate import tracing
from speechgate.errors import NoProviderAvailable
from speechgate.metering.tenancy import NOBODY, Caller
from speechgate.routing import choice
from speechgate.routing.breaker import CircuitBreaker, Outcome
from speechgate.routing.config import RoutesConfig, load_routes
from speechgate.routing.prometheus import RoutingMetrics
from speechgate.routing.providers import Answer, Provider, counts_as_failure
from speechgate.routing.shadow import (
    MAX_COMPARED_BYTES,
    Sample,
    ShadowLog,
    ShadowPair,
    compare,
    failed,
)
from speechgate.routing.table import MakeProvider, ProviderEntry, RoutingState
from speechgate.speech_request import SpeechRequest

log = logging.getLogger(__name__)

_SHADOW_SALT = "shadow"
# Shadow requests under way at most: beyond it, samples are skipped rather than letting a
# slow shadow provider pile up work (and memory) behind a busy route.
MAX_SHADOWS = 16
# How long a shadow waits for the client's request to end (a client reading slowly).
_PRIMARY_WAIT = 600.0


class Router:
    def __init__(
        self,
        config: RoutesConfig,
        make_provider: MakeProvider,
        *,
        path: Path | None = None,
        metrics: RoutingMetrics | None = None,
        default_sample_rate: int = 24000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._make_provider = make_provider
        self._path = path
        self._clock = clock
        self._metrics = metrics
        self._default_rate = default_sample_rate
        self._config = config
        self._state, _ = RoutingState.build(config, make_provider, self._new_breaker)
        self._in_flight: dict[Provider, int] = {}
        self._drained: dict[Provider, asyncio.Event] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._shadows = 0
        self.shadow_log = ShadowLog()
        if metrics is not None:
            metrics.watch(lambda: self._state)

    @property
    def state(self) -> RoutingState:
        return self._state

    def serves(self, model: str) -> bool:
        return self._state.route(model) is not None

    # --- runtime control: each takes effect for the next request ----------------------------

    def set_state(self, state: RoutingState) -> None:
        self._state = state

    def reload(self) -> None:
        """Re-read the routes file. A bad file raises ValueError and changes nothing; requests
        under way finish on the providers they started with."""
        if self._path is None:
            raise ValueError("no routes file to reload")
        config = load_routes(self._path)
        self._state, retired = RoutingState.build(
            config, self._make_provider, self._new_breaker, self._state
        )
        self._config = config
        for provider in retired:
            self._spawn(self._retire(provider))
        log.info("routes reloaded from %s", self._path)

    # --- serving ------------------------------------------------------------------------------

    async def open(
        self,
        request: SpeechRequest,
        key: str,
        request_id: str,
        on_attempt: Callable[[str], object] = lambda _: None,
        caller: Caller = NOBODY,
    ) -> Answer:
        """The first provider's answer that produced audio. Raises the last provider's error
        when every one failed, NoProviderAvailable when every breaker is open. `on_attempt`
        hears each provider's name as it is tried (metering names the last one); `caller`: who
        asks (the stored voices they may name; their place in this server's queue)."""
        with tracing.span(tracing.ROUTE) as routed:
            answer = await self._open(request, key, request_id, on_attempt, caller, routed)
            routed.set({"speechgate.provider": answer.provider})
            return answer

    async def _open(
        self,
        request: SpeechRequest,
        key: str,
        request_id: str,
        on_attempt: Callable[[str], object],
        caller: Caller,
        routed: tracing.Span,
    ) -> Answer:
        state = self._state
        found = state.route(request.model)
        assert found is not None, "serves() said no"
        route_name, route = found
        routed.set({"speechgate.route": route_name})
        last_error: Exception | None = None
        for name in choice.attempt_order(route.weights, route.fallback, key, state.disabled):
            entry = state.providers[name]
            if not entry.breaker.allow():
                continue
            on_attempt(name)
            try:
                with tracing.span(tracing.ATTEMPT, {"speechgate.provider": name}):
                    answer = await self._opened(entry.provider, request, request_id, caller)
            except Exception as error:
                if not counts_as_failure(error):
                    entry.breaker.record(Outcome.NEUTRAL)
                    raise
                entry.breaker.record(Outcome.FAILURE)
                self._count(route_name, name, Outcome.FAILURE)
                if self._metrics is not None:
                    self._metrics.failovers.labels(route_name, name).inc()
                log.warning("route %s: provider %s failed (%r)", route_name, name, error)
                last_error = error
                continue
            except BaseException:  # cancelled: the client left
                entry.breaker.record(Outcome.NEUTRAL)
                raise
            # A shadow names the stored voices its caller may, but takes none of their place
            # in the queue: the caller would hear nothing of it.
            shadowed = Caller(owner=caller.owner)
            shadow = self._shadow(state, route_name, request, key, request_id, name, shadowed)
            watched = _Watched(
                name,
                answer,
                shadow,
                self._clock,
                partial(self._ended, route_name, name, entry, answer.time_to_first_audio),
            )
            ttfa_ms = answer.time_to_first_audio * 1000
            return Answer(
                answer.media_type,
                watched.body(),
                answer.progress,
                answer.headers
                | {
                    "x-speechgate-provider": name,
                    "x-speechgate-time-to-first-audio-ms": f"{ttfa_ms:.1f}",
                },
                provider=name,
                on_close=watched.aclose,
                words=answer.words,
                engine=answer.engine,
            )
        if last_error is not None:
            raise last_error
        raise NoProviderAvailable(route_name)

    async def _opened(
        self, provider: Provider, request: SpeechRequest, request_id: str, caller: Caller
    ) -> Answer:
        """`provider.open`, counted in flight until its answer ends (a reload waits for it)."""
        self._in_flight[provider] = self._in_flight.get(provider, 0) + 1
        try:
            return await provider.open(request, request_id, caller)
        except BaseException:
            self._leave(provider)
            raise

    def _ended(
        self, route: str, name: str, entry: ProviderEntry, ttfa: float, outcome: Outcome
    ) -> None:
        entry.breaker.record(outcome, ttfa)
        self._count(route, name, outcome)
        self._leave(entry.provider)

    # --- shadow traffic -----------------------------------------------------------------------

    def _shadow(
        self,
        state: RoutingState,
        route: str,
        request: SpeechRequest,
        key: str,
        request_id: str,
        primary: str,
        caller: Caller,
    ) -> asyncio.Future[Sample | None] | None:
        config = state.routes[route].shadow
        if (
            config is None
            or config.provider == primary
            or request.stream_format != "audio"
            or not state.providers[config.provider].enabled
            or not choice.sampled(key, config.percent, _SHADOW_SALT)
            or self._shadows >= MAX_SHADOWS
        ):
            return None
        primary_sample: asyncio.Future[Sample | None] = asyncio.get_running_loop().create_future()
        provider = state.providers[config.provider].provider
        self._shadows += 1
        comparison = self._compare(
            route, provider, request, request_id, caller, primary, primary_sample
        )
        self._spawn(self._bounded(comparison, f"route {route}: shadow of {request_id}"))
        return primary_sample

    async def _bounded(self, comparison: Coroutine[Any, Any, None], what: str) -> None:
        try:
            async with asyncio.timeout(_PRIMARY_WAIT):
                await comparison
        except TimeoutError:
            log.warning("%s abandoned, unfinished", what)
        finally:
            self._shadows -= 1

    async def _compare(
        self,
        route: str,
        provider: Provider,
        request: SpeechRequest,
        request_id: str,
        caller: Caller,
        primary_name: str,
        primary: asyncio.Future[Sample | None],
    ) -> None:
        started = self._clock()
        try:
            answer = await self._opened(provider, request, f"{request_id}-shadow", caller)
            try:
                data = b"".join([chunk async for chunk in answer.body])
            finally:
                try:
                    await answer.aclose()
                finally:
                    self._leave(provider)
            elapsed = self._clock() - started
            shadow = Sample(provider.name, answer.time_to_first_audio, elapsed, data)
        except Exception as error:
            self._record(failed(route, await primary, provider.name, primary_name, repr(error)))
            return
        client = await primary
        if client is None:
            return  # the client's request did not complete: nothing to compare
        fmt = request.format
        rate = fmt.sample_rate or request.sample_rate or self._default_rate
        pair = await asyncio.to_thread(compare, route, client, shadow, fmt.format, rate)
        self._record(pair)

    def _record(self, pair: ShadowPair) -> None:
        self.shadow_log.record(pair)
        if self._metrics is not None:
            self._metrics.record_shadow(pair)

    # --- bookkeeping --------------------------------------------------------------------------

    def _new_breaker(self) -> CircuitBreaker:
        return CircuitBreaker(self._config.breaker, self._clock)

    def _count(self, route: str, provider: str, outcome: Outcome) -> None:
        if self._metrics is not None:
            self._metrics.requests.labels(route, provider, outcome.value).inc()

    def _leave(self, provider: Provider) -> None:
        count = self._in_flight[provider] - 1
        if count:
            self._in_flight[provider] = count
            return
        del self._in_flight[provider]
        drained = self._drained.pop(provider, None)
        if drained is not None:
            drained.set()

    async def _retire(self, provider: Provider) -> None:
        """Close a provider a reload removed, once its last request has ended."""
        if provider in self._in_flight:
            await self._drained.setdefault(provider, asyncio.Event()).wait()
        await provider.aclose()

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """Stop shadow work and close every provider."""
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await asyncio.gather(
            *(entry.provider.aclose() for entry in self._state.providers.values()),
            return_exceptions=True,
        )


class _Watched:
    """A provider's answer on its way to the client. However it ends (read to the end, failed,
    cut short, or closed without ever being read), its outcome goes to `ended` and a copy of
    its body to the shadow, exactly once."""

    def __init__(
        self,
        name: str,
        answer: Answer,
        shadow: asyncio.Future[Sample | None] | None,
        clock: Callable[[], float],
        ended: Callable[[Outcome], None],
    ) -> None:
        self._name = name
        self._answer = answer
        self._shadow = shadow
        self._clock = clock
        self._ended = ended
        self._started = clock() - answer.time_to_first_audio
        self._outcome = Outcome.NEUTRAL
        self._kept: bytearray | None = bytearray() if shadow is not None else None
        self._closed = False

    async def body(self) -> AsyncGenerator[bytes]:
        try:
            async for chunk in self._answer.body:
                if self._kept is not None:
                    self._kept += chunk
                    if len(self._kept) > MAX_COMPARED_BYTES:
                        self._kept = None
                yield chunk
            self._outcome = Outcome.SUCCESS
        except Exception as error:
            self._outcome = Outcome.FAILURE if counts_as_failure(error) else Outcome.NEUTRAL
            raise
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._answer.aclose()
        finally:
            self._ended(self._outcome)
            if self._shadow is not None and not self._shadow.done():
                kept = self._kept if self._outcome is Outcome.SUCCESS else None
                self._shadow.set_result(
                    None
                    if kept is None
                    else Sample(
                        self._name,
                        self._answer.time_to_first_audio,
                        self._clock() - self._started,
                        bytes(kept),
                    )
                )
