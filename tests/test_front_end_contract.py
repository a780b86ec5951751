"""The contract every front end keeps, whichever code walks its requests through the lifecycle.

One server, five ways in: OpenAI's `POST /v1/audio/speech`, ElevenLabs'
`POST /v1/text-to-speech/{voice_id}` (and `/stream`), the WebSocket session, Wyoming, and a
route that sends a model to the `local` provider. Each way in makes the same promises, each in
its own wire format: the input bound, a key's rate and concurrency limits, one usage record,
the unknown voice named, a known voice pulled then spoken, the job aborted when the client
leaves, and the same spans. The test reads only what clients and operators see (the wire
formats, `/v1/usage`, `/v1/audio/voices`, `/metrics`, the exported spans), so it holds the
front ends to the contract through any rewrite of what lies behind them.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar, cast

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, read_event, write_event
from wyoming.tts import Synthesize, SynthesizeVoice

from speechgate import tracing
from speechgate.voices.installed import item_dir
from tests.helpers.hub import fake_hub, publish_piper_voices
from tests.helpers.server import RunningServer, free_port, running_server
from tests.helpers.settings import fake_settings, share_engine_data
from tests.helpers.spans import LIFECYCLE, ROUTED, recorded_spans
from tests.helpers.tenancy import ADMIN_KEY, admin, new_key, stored_key, usage
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.slow

TEXT = "Hello there."
LIMIT = 1000
"""`max_input_chars`: above the long text below, so only the text over it is refused."""
OVER = "far too long " * (LIMIT // 13 + 1)
"""Over the bound, and one sentence: where it is not refused, it is spoken quickly."""
LONG = " ".join(f"Part {n} here." for n in range(60))
# Each sentence keeps the fake engine busy this long: the long text is still being made when
# its client leaves (even a client held up for seconds), a short one is answered at once.
CHUNK_DELAY = 0.1
RATE = 24000
"""The sample rate asked of the HTTP front ends (16-bit PCM)."""
UNKNOWN = "nobody-by-this-name"
# A generic name of Piper's table and the voice it means: published on the fake hub, installed
# by nobody. Each front end's test pulls it and removes it again, so the next starts from a voice
# that is not there; pulled again to the same path, it is the same model to its worker, which
# loads (and optimizes) it once rather than once per front end.
PULLED = ("de_de_male", "de_DE-thorsten-medium")
ROUTES = """
providers:
  here: {kind: local, model: fake}
  here-piper: {kind: local, model: piper}
routes:
  routed: {providers: {here: 100}}
  routed-piper: {providers: {here-piper: 100}}
"""


@dataclass
class Served:
    server: RunningServer
    wyoming_port: int
    principal: tuple[str, str]
    """(id, secret) of `wyoming_principal`'s key."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    data_dir = tmp_path_factory.mktemp("contract")
    routes = data_dir / "routes.yaml"
    routes.write_text(ROUTES)
    principal = stored_key(data_dir)
    share_engine_data(data_dir)
    port = free_port()
    with fake_hub() as hub:
        publish_piper_voices(hub, [PULLED[1]])
        settings = fake_settings(
            engines=["fake", "piper"],
            default_engine="fake",
            engine_options={"fake": {"chunk_delay": str(CHUNK_DELAY)}},
            text={"max_input_chars": LIMIT},
            auth={"mode": "keys", "admin_key": ADMIN_KEY},
            hub={"auto_pull": True, "endpoint": hub.url},
            data_dir=data_dir,
            routing={"routes_file": routes},
            wyoming={"uri": f"tcp://127.0.0.1:{port}", "principal": principal[0]},
            usage={"flush_interval": 0.1},
            # Sessions send audio as fast as it is read: a text not refused is over quickly.
            sessions={"max_lead_seconds": 0},
        )
        with running_server(settings) as server:
            yield Served(server, port, principal)


# --- what a front end answered, read from its own wire format ---------------------------------


@dataclass(frozen=True)
class Refusal:
    status: int | None
    """The HTTP status; None where the protocol has none (WebSocket events, Wyoming)."""
    code: str
    message: str


@dataclass(frozen=True)
class Spoken:
    audio: bytes = b""
    rate: int = 0
    refusal: Refusal | None = None

    @property
    def seconds(self) -> float:
        return len(self.audio) / 2 / self.rate if self.rate else 0.0


class FrontEnd:
    """One way in, driven as its clients drive it."""

    name: ClassVar[str]
    spans: ClassVar[set[str]] = LIFECYCLE
    http: ClassVar[bool] = True
    """Whether refusals carry an HTTP status."""
    unknown_voice_status: ClassVar[int] = 400
    input_bound_code: ClassVar[str] = "string_above_max_length"

    def __init__(self, served: Served) -> None:
        self.served = served
        self.server = served.server

    def status(self, http_status: int) -> int | None:
        return http_status if self.http else None

    @contextmanager
    def caller(self, **limits: Any) -> Iterator[str]:
        """The secret of a key with `limits`, for as long as the block runs."""
        yield new_key(self.server, **limits)[1]

    def speak(
        self, secret: str, text: str = TEXT, voice: str | None = None, model: str = "fake"
    ) -> Spoken:
        raise NotImplementedError

    def holding(self, secret: str) -> contextlib.AbstractContextManager[None]:
        """A long answer under way (its first audio read) until the block ends, when the
        client leaves without reading the rest."""
        raise NotImplementedError


@contextmanager
def _held(url: str, **request: Any) -> Iterator[None]:
    """`POST url` with `request`, its answer's first audio read, until the block ends."""
    with httpx.stream("POST", url, timeout=120, **request) as answer:
        assert answer.status_code == 200
        # Kept: dropping the iterator would close the connection at once.
        chunks = answer.iter_bytes()
        next(chunks)
        yield


class OpenAI(FrontEnd):
    name = "openai"

    def _body(self, text: str, voice: str | None, model: str) -> dict[str, object]:
        return {
            "model": model,
            "voice": voice or "alloy",
            "input": text,
            "response_format": "pcm",
            "sample_rate": RATE,
        }

    def speak(
        self, secret: str, text: str = TEXT, voice: str | None = None, model: str = "fake"
    ) -> Spoken:
        answer = httpx.post(
            f"{self.server.url}/v1/audio/speech",
            json=self._body(text, voice, model),
            headers={"Authorization": f"Bearer {secret}"},
            timeout=120,
        )
        if answer.status_code != 200:
            error = answer.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}, error
            return Spoken(refusal=Refusal(answer.status_code, error["code"], error["message"]))
        return Spoken(answer.content, RATE)

    def holding(self, secret: str) -> contextlib.AbstractContextManager[None]:
        return _held(
            f"{self.server.url}/v1/audio/speech",
            json=self._body(LONG, None, "fake"),
            headers={"Authorization": f"Bearer {secret}"},
        )


class Routed(OpenAI):
    """OpenAI's route for a model that the routes table sends to the `local` provider."""

    name = "routed"
    spans = ROUTED

    def _body(self, text: str, voice: str | None, model: str) -> dict[str, object]:
        return super()._body(text, voice, f"routed-{model}" if model != "fake" else "routed")


class ElevenLabs(FrontEnd):
    name = "elevenlabs"
    unknown_voice_status = 404

    def speak(
        self, secret: str, text: str = TEXT, voice: str | None = None, model: str = "fake"
    ) -> Spoken:
        answer = httpx.post(
            f"{self.server.url}/v1/text-to-speech/{voice or 'alloy'}",
            params={"output_format": f"pcm_{RATE}"},
            json={"text": text, "model_id": model},
            headers={"xi-api-key": secret},
            timeout=120,
        )
        if answer.status_code != 200:
            detail = answer.json()["detail"]
            assert set(detail) == {"status", "message"}, detail
            return Spoken(refusal=Refusal(answer.status_code, detail["status"], detail["message"]))
        return Spoken(answer.content, RATE)

    def holding(self, secret: str) -> contextlib.AbstractContextManager[None]:
        return _held(
            f"{self.server.url}/v1/text-to-speech/alloy/stream",
            params={"output_format": f"pcm_{RATE}"},
            json={"text": LONG, "model_id": "fake"},
            headers={"xi-api-key": secret},
        )


class WebSocket(FrontEnd):
    name = "websocket"
    http = False
    # A session's text comes in parts: the bound is on the text waiting to be spoken, as on a
    # Wyoming stream's.
    input_bound_code = "too_much_pending_text"

    @contextmanager
    def _session(
        self, secret: str, text: str, voice: str | None, model: str
    ) -> Iterator[ClientConnection]:
        """A session sent `text` whole: the server may close it at any message (a refusal)."""
        url = self.server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
        session = {"model": model, "voice": voice or "alloy", "response_format": "pcm"}
        with connect(url, additional_headers={"Authorization": f"Bearer {secret}"}) as ws:
            with contextlib.suppress(ConnectionClosed):
                ws.send(json.dumps({"type": "session.update", "session": session}))
                ws.send(json.dumps({"type": "input_text.delta", "delta": text}))
                ws.send(json.dumps({"type": "input_text.done"}))
            yield ws

    def speak(
        self, secret: str, text: str = TEXT, voice: str | None = None, model: str = "fake"
    ) -> Spoken:
        audio, rate = bytearray(), 0
        with self._session(secret, text, voice, model) as ws:
            while isinstance(message := ws.recv(timeout=120), bytes) or (
                (event := json.loads(message))["type"] not in ("session.done", "error")
            ):
                if isinstance(message, bytes):
                    audio += message
                elif event["type"] == "session.created":
                    rate = event["session"]["sample_rate"]
        if event["type"] == "error":
            error = event["error"]
            return Spoken(bytes(audio), rate, Refusal(None, error["code"], error["message"]))
        return Spoken(bytes(audio), rate)

    @contextmanager
    def holding(self, secret: str) -> Iterator[None]:
        with self._session(secret, LONG, None, "fake") as ws:
            while not isinstance(message := ws.recv(timeout=120), bytes):
                assert json.loads(message)["type"] != "error", message
            yield


class Wyoming(FrontEnd):
    """Acts for `wyoming_principal`'s key whatever the client: a test's limits go on that key
    (through the admin API, which applies them at once) and come off when the test ends. The
    engine is the one whose voice is named (the fake one's for none)."""

    name = "wyoming"
    http = False

    @contextmanager
    def caller(self, **limits: Any) -> Iterator[str]:
        key_id, secret = self.served.principal
        self._limit(key_id, limits)
        try:
            yield secret
        finally:
            self._limit(key_id, dict.fromkeys(limits))

    def _limit(self, key_id: str, limits: dict[str, Any]) -> None:
        if limits:
            with admin(self.server) as client:
                answer = client.patch(f"/admin/keys/{key_id}", json=limits)
            assert answer.status_code == 200, answer.text

    @contextmanager
    def _synthesizing(self, text: str, voice: str | None) -> Iterator[BinaryIO]:
        """A connection that asked for `text` to be spoken: its events to read."""
        with (
            socket.create_connection(("127.0.0.1", self.served.wyoming_port), timeout=120) as sock,
            cast(BinaryIO, sock.makefile("rwb")) as stream,
        ):
            named = SynthesizeVoice(name=voice) if voice else None
            write_event(Synthesize(text=text, voice=named).event(), stream)
            yield stream

    def _read(self, stream: BinaryIO) -> Event:
        event = read_event(stream)
        assert event is not None, "the server closed the connection mid-answer"
        return event

    def speak(
        self, secret: str, text: str = TEXT, voice: str | None = None, model: str = "fake"
    ) -> Spoken:
        audio, rate = bytearray(), 0
        with self._synthesizing(text, voice) as stream:
            while not AudioStop.is_type((event := self._read(stream)).type):
                if Error.is_type(event.type):
                    error = Error.from_event(event)
                    refusal = Refusal(None, error.code or "", error.text)
                    return Spoken(bytes(audio), rate, refusal)
                if AudioStart.is_type(event.type):
                    rate = AudioStart.from_event(event).rate
                elif AudioChunk.is_type(event.type):
                    audio += AudioChunk.from_event(event).audio
        return Spoken(bytes(audio), rate)

    @contextmanager
    def holding(self, secret: str) -> Iterator[None]:
        with self._synthesizing(LONG, None) as stream:
            while not AudioChunk.is_type((event := self._read(stream)).type):
                assert not Error.is_type(event.type), event
            yield


FRONT_ENDS: list[type[FrontEnd]] = [OpenAI, ElevenLabs, WebSocket, Wyoming, Routed]


@pytest.fixture(scope="module", params=FRONT_ENDS, ids=lambda kind: kind.name)
def front_end(request: pytest.FixtureRequest, served: Served) -> FrontEnd:
    kind: type[FrontEnd] = request.param
    return kind(served)


BREACHES: dict[tuple[str, str], str] = {}
"""(test, front end) -> the bug by which today's code breaks that promise there: expected to
fail, strictly, so that fixing the bug means deleting its line here."""


@pytest.fixture(autouse=True)
def _known_breach(request: pytest.FixtureRequest, front_end: FrontEnd) -> None:
    reason = BREACHES.get((request.node.originalname, front_end.name))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


# --- what the server did, read as an operator reads it ----------------------------------------


def _jobs(server: RunningServer) -> dict[str, float]:
    """The fake engine's jobs by outcome, and `in_flight`: those running now."""
    jobs: dict[str, float] = {"in_flight": 0.0}
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("engine") != "fake":
                continue
            if sample.name == "speechgate_jobs_total":
                jobs[sample.labels["outcome"]] = sample.value
            elif sample.name == "speechgate_in_flight":
                jobs["in_flight"] = sample.value
    return jobs


def _idle(server: RunningServer) -> bool:
    return _jobs(server)["in_flight"] == 0


def _installed(server: RunningServer, secret: str) -> set[str]:
    answer = httpx.get(
        f"{server.url}/v1/audio/voices",
        params={"model": "piper"},
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return {voice["id"] for voice in answer.json()["voices"]}


def _uninstall(server: RunningServer, key: str) -> None:
    """Remove the pulled voice `key` as an operator would: its directory, then a refresh."""
    shutil.rmtree(item_dir(server.runtime.settings.models_dir, "piper", key), ignore_errors=True)
    server.runtime.refresh_installed()


# --- the contract -----------------------------------------------------------------------------


def test_a_request_makes_the_same_spans(front_end: FrontEnd) -> None:
    with front_end.caller() as secret, recorded_spans() as spans:
        assert front_end.speak(secret).refusal is None

        def roots() -> list[Any]:
            return [s for s in spans.get_finished_spans() if s.name == tracing.REQUEST]

        # The root ends last, once the usage is recorded: after the client has its answer.
        wait_for(lambda: bool(roots()))
        finished = spans.get_finished_spans()
    [root] = roots()
    assert {span.context.trace_id for span in finished} == {root.context.trace_id}
    assert {span.name for span in finished} == front_end.spans


def test_input_over_the_bound_is_refused_and_nothing_is_synthesized(
    front_end: FrontEnd, served: Served
) -> None:
    before = _jobs(served.server)
    with front_end.caller() as secret:
        spoken = front_end.speak(secret, text=OVER)
    assert spoken.refusal is not None, "spoken"
    assert (spoken.refusal.status, spoken.refusal.code) == (
        front_end.status(400),
        front_end.input_bound_code,
    )
    assert str(LIMIT) in spoken.refusal.message
    assert spoken.audio == b""
    assert _jobs(served.server) == before


def test_a_keys_rate_limit_refuses_the_request_past_it(front_end: FrontEnd) -> None:
    with front_end.caller(requests_per_second=0.001, burst=1) as secret:
        assert front_end.speak(secret).refusal is None
        second = front_end.speak(secret)
    refused = second.refusal
    assert refused is not None and second.audio == b""
    assert (refused.status, refused.code) == (front_end.status(429), "rate_limit_exceeded")


def test_a_keys_concurrency_limit_refuses_the_request_past_it(front_end: FrontEnd) -> None:
    with front_end.caller(max_concurrent=1) as secret:
        with front_end.holding(secret):
            second = front_end.speak(secret)
        # The slot is given back however the held answer ended (here: its client left).
        wait_for(lambda: front_end.speak(secret).refusal is None)
    refused = second.refusal
    assert refused is not None and second.audio == b""
    assert (refused.status, refused.code) == (
        front_end.status(429),
        "concurrency_limit_exceeded",
    )


def test_one_request_is_one_usage_record_with_its_characters_and_audio(
    front_end: FrontEnd, served: Served
) -> None:
    with front_end.caller() as secret:
        before = usage(served.server, secret)["total"]
        spoken = front_end.speak(secret)
        assert spoken.refusal is None and spoken.seconds > 0
        # Records are written in batches (every `usage_flush_interval`).
        wait_for(lambda: usage(served.server, secret)["total"]["requests"] > before["requests"])
        after = usage(served.server, secret)["total"]
    assert after["requests"] - before["requests"] == 1
    assert after["errors"] == before["errors"]
    assert after["characters"] - before["characters"] == len(TEXT)
    seconds = after["audio_seconds"] - before["audio_seconds"]
    assert seconds == pytest.approx(spoken.seconds, abs=0.01)


def test_an_unknown_voice_is_refused_by_name(front_end: FrontEnd) -> None:
    with front_end.caller() as secret:
        refused = front_end.speak(secret, voice=UNKNOWN).refusal
    assert refused is not None
    assert (refused.status, refused.code) == (
        front_end.status(front_end.unknown_voice_status),
        "voice_not_found",
    )
    assert UNKNOWN in refused.message


def test_a_known_voice_not_installed_is_pulled_then_spoken(
    front_end: FrontEnd, served: Served
) -> None:
    generic, key = PULLED
    with front_end.caller() as secret:
        assert key not in _installed(served.server, secret)
        try:
            spoken = front_end.speak(secret, voice=generic, model="piper")
            assert spoken.refusal is None, spoken.refusal
            assert key in _installed(served.server, secret)
        finally:
            _uninstall(served.server, key)
    assert spoken.seconds > 0.3


def test_a_client_that_leaves_mid_stream_aborts_its_job(
    front_end: FrontEnd, served: Served
) -> None:
    wait_for(lambda: _idle(served.server))
    before = _jobs(served.server)
    with front_end.caller() as secret, front_end.holding(secret):
        assert not _idle(served.server)
    wait_for(lambda: _idle(served.server))
    after = _jobs(served.server)
    assert after.get("cancelled", 0) == before.get("cancelled", 0) + 1
    assert (after.get("failed", 0), after.get("lost", 0)) == (
        before.get("failed", 0),
        before.get("lost", 0),
    )
