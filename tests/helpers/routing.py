"""Routers over fake providers: a provider that answers from memory, failing or breaking
midway on demand, and counts what it was asked; a three-provider routes table."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from speechgate.audio.formats import parse_format
from speechgate.errors import UpstreamUnavailable
from speechgate.metering.tenancy import Caller
from speechgate.routing.config import ProviderConfig, RoutesConfig
from speechgate.routing.providers import Answer, Relayed
from speechgate.routing.router import Router
from speechgate.speech_request import SpeechRequest

AUDIO = bytes(range(256)) * 40


class FakeProvider:
    def __init__(self, name: str) -> None:
        self.name = name
        self.error: Exception | None = None
        self.break_midway = False
        self.audio = AUDIO
        self.opened = 0
        self.answered = 0
        self.owners: list[str | None] = []
        self.answers_closed = 0
        self.closed = False

    async def open(self, request: SpeechRequest, request_id: str, caller: Caller) -> Answer:
        self.opened += 1
        self.owners.append(caller.owner)
        if self.error is not None:
            raise self.error
        self.answered += 1
        return Answer("audio/pcm", self._body(), Relayed(0.01), {}, on_close=self._answer_closed)

    async def _answer_closed(self) -> None:
        self.answers_closed += 1

    async def _body(self) -> AsyncGenerator[bytes]:
        yield self.audio[:100]
        if self.break_midway:
            raise UpstreamUnavailable("dropped")
        yield self.audio[100:]

    async def aclose(self) -> None:
        self.closed = True


def config(**route: object) -> RoutesConfig:
    return RoutesConfig.model_validate(
        {
            "providers": {name: {"kind": "local"} for name in ("a", "b", "c")},
            "breaker": {"min_requests": 2, "error_rate": 0.4, "open_for": 30},
            "routes": {"tts-1": {"providers": {"a": 100}, "fallback": ["b"], **route}},
        }
    )


def make_router(fakes: dict[str, FakeProvider], routes: RoutesConfig, **kwargs: object) -> Router:
    def make(name: str, _: ProviderConfig) -> FakeProvider:
        return fakes[name]

    return Router(routes, make, **kwargs)


BODY = SpeechRequest(model="TTS-1", voice="alloy", format=parse_format("pcm"), text="Hi.")
