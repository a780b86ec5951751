"""One trace per speech request: every front end's request makes the same spans, children of
one root, because they walk one lifecycle; and `speechgate serve` sends them over OTLP/HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from websockets.sync.client import connect
from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize

from speechgate import tracing
from tests.helpers.otlp import OtlpReceiver
from tests.helpers.server import RunningServer, free_port, running_server, serve_process
from tests.helpers.settings import fake_settings
from tests.helpers.spans import LIFECYCLE, ROUTED, recorded_spans
from tests.helpers.waiting import wait_for
from tests.helpers.wyoming import read_audio

TEXT = "Hi."
ROUTES = """
providers:
  here: {kind: local, model: fake}
routes:
  routed: {providers: {here: 100}}
"""


def test_tracing_off_hands_out_spans_that_record_nothing() -> None:
    assert not tracing.enabled()
    with tracing.span(tracing.PLAN) as step:
        step.set({"speechgate.engine": "fake"})
        assert not step.recording
    assert tracing.job({}) is tracing.NO_JOB
    assert tracing.propagation_headers() == {}
    with tracing.request("openai") as root:
        tracing.describe_request({"speechgate.status": 200})
        root.end(200)


def test_the_endpoint_is_a_base_url_as_otlp_http_has_it() -> None:
    assert tracing.traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert tracing.traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert tracing.traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    with recorded_spans() as exporter:
        yield exporter


class Served:
    def __init__(self, server: RunningServer, wyoming_port: int) -> None:
        self.server = server
        self.wyoming_port = wyoming_port

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, spans: InMemorySpanExporter
) -> Iterator[Served]:
    routes = tmp_path_factory.mktemp("routes") / "routes.yaml"
    routes.write_text(ROUTES)
    port = free_port()
    settings = fake_settings(
        routing={"routes_file": routes}, wyoming={"uri": f"tcp://127.0.0.1:{port}"}
    )
    with running_server(settings) as server:
        yield Served(server, port)


def _openai(served: Served, **body: object) -> None:
    answer = httpx.post(
        f"{served.url}/v1/audio/speech",
        json={"model": "fake", "voice": "alloy", "input": TEXT, "response_format": "pcm"} | body,
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert answer.content


def _openai_sse(served: Served) -> None:
    answer = httpx.post(
        f"{served.url}/v1/audio/speech",
        json={"model": "fake", "voice": "alloy", "input": TEXT, "stream_format": "sse"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert '"speech.audio.done"' in answer.text


def _elevenlabs(served: Served) -> None:
    answer = httpx.post(
        f"{served.url}/v1/text-to-speech/alloy",
        params={"output_format": "pcm_24000"},
        json={"text": TEXT, "model_id": "fake"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert answer.content


def _websocket(served: Served) -> None:
    url = served.url.replace("http://", "ws://") + "/v1/audio/speech/stream"
    audio = bytearray()
    with connect(url) as ws:
        session = {"model": "fake", "voice": "alloy", "response_format": "pcm"}
        ws.send(json.dumps({"type": "session.update", "session": session}))
        ws.send(json.dumps({"type": "input_text.delta", "delta": TEXT}))
        ws.send(json.dumps({"type": "input_text.done"}))
        while True:
            message = ws.recv(timeout=60)
            if isinstance(message, bytes):
                audio += message
                continue
            event = json.loads(message)
            assert event["type"] != "error", event
            if event["type"] == "session.done":
                break
    assert audio


def _wyoming(served: Served) -> None:
    async def speak() -> int:
        async with AsyncTcpClient("127.0.0.1", served.wyoming_port) as connection:
            await connection.write_event(Synthesize(text=TEXT).event())
            return len((await read_audio(connection)).pcm)

    assert asyncio.run(speak()) > 0


def _routed(served: Served) -> None:
    _openai(served, model="routed")


FRONT_ENDS: dict[str, tuple[Callable[[Served], None], str, set[str]]] = {
    "openai": (_openai, "openai", LIFECYCLE),
    "openai-sse": (_openai_sse, "openai", LIFECYCLE),
    "elevenlabs": (_elevenlabs, "elevenlabs", LIFECYCLE),
    "websocket": (_websocket, "websocket", LIFECYCLE),
    "wyoming": (_wyoming, "wyoming", LIFECYCLE),
    "routed-local": (_routed, "openai", ROUTED),
}


def _root(spans: InMemorySpanExporter) -> ReadableSpan | None:
    roots = [span for span in spans.get_finished_spans() if span.name == tracing.REQUEST]
    assert len(roots) <= 1, roots
    return roots[0] if roots else None


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_every_front_end_makes_one_trace_with_the_same_spans(
    front_end: str, served: Served, spans: InMemorySpanExporter
) -> None:
    speak, name, expected = FRONT_ENDS[front_end]
    spans.clear()
    speak(served)
    # The root ends last, once the usage is recorded: after the client has its answer.
    wait_for(lambda: _root(spans) is not None, timeout=30)
    root = _root(spans)
    assert root is not None and root.parent is None
    finished = spans.get_finished_spans()
    assert {span.context.trace_id for span in finished} == {root.context.trace_id}
    assert {span.name for span in finished} == expected
    ids = {span.context.span_id for span in finished}
    children = [span for span in finished if span is not root]
    assert all(span.parent is not None and span.parent.span_id in ids for span in children)
    attributes = dict(root.attributes or {})
    assert attributes["speechgate.front_end"] == name
    assert attributes["speechgate.engine"] == "fake"
    assert attributes["speechgate.characters"] == len(TEXT)
    assert attributes["speechgate.status"] == 200
    first_audio = next(span for span in finished if span.name == tracing.FIRST_AUDIO)
    assert first_audio.attributes and first_audio.attributes["speechgate.engine_seconds"] > 0
    synthesis = next(span for span in finished if span.name == tracing.SYNTHESIS)
    assert synthesis.attributes and synthesis.attributes["speechgate.audio_seconds"] > 0
    if expected is ROUTED:
        route = next(span for span in finished if span.name == tracing.ROUTE)
        assert route.attributes and route.attributes["speechgate.provider"] == "here"


def test_a_refused_request_is_traced_with_its_error(
    served: Served, spans: InMemorySpanExporter
) -> None:
    spans.clear()
    answer = httpx.post(
        f"{served.url}/v1/audio/speech",
        json={"model": "fake", "voice": "nobody-by-this-name", "input": TEXT},
        timeout=60,
    )
    assert answer.status_code == 400, answer.text
    wait_for(lambda: _root(spans) is not None, timeout=30)
    finished = {span.name: span for span in spans.get_finished_spans()}
    # Refused while it was planned, before the key's limits: never admitted.
    assert set(finished) == {tracing.REQUEST, tracing.PLAN, tracing.USAGE}
    assert not finished[tracing.PLAN].status.is_ok
    assert (finished[tracing.REQUEST].attributes or {})["speechgate.status"] == 400


def test_a_client_trace_context_goes_on_in_the_request(
    served: Served, spans: InMemorySpanExporter
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    spans.clear()
    answer = httpx.post(
        f"{served.url}/v1/audio/speech",
        json={"model": "fake", "voice": "alloy", "input": TEXT, "response_format": "pcm"},
        headers={"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"},
        timeout=60,
    )
    assert answer.status_code == 200
    wait_for(lambda: _root(spans) is not None, timeout=30)
    root = _root(spans)
    assert root is not None and root.parent is not None
    assert f"{root.context.trace_id:032x}" == trace_id


@pytest.mark.slow
def test_speechgate_serve_sends_its_traces_to_an_otlp_receiver(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        env = {
            "SPEECHGATE_DATA_DIR": str(tmp_path),
            # The standard variable: no speechgate setting needed.
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        with serve_process("--engine", "fake", "--workers", "1", env=env) as (url, _):
            answer = httpx.post(
                f"{url}/v1/audio/speech",
                json={"model": "fake", "voice": "alloy", "input": TEXT},
                timeout=60,
            )
            assert answer.status_code == 200
            wait_for(lambda: tracing.REQUEST in receiver.span_names(), timeout=30)
        spans = receiver.spans()
    assert {span.name for span in spans} == LIFECYCLE
    assert len({span.trace_id for span in spans}) == 1
    root = next(span for span in spans if span.name == tracing.REQUEST)
    assert not root.parent_span_id
    attributes = {item.key: item.value for item in root.attributes}
    assert attributes["speechgate.front_end"].string_value == "openai"
    assert attributes["speechgate.status"].int_value == 200
    resource = {item.key: item.value.string_value for item in receiver.resources()[0].attributes}
    assert resource["service.name"] == "speechgate"


def test_speechgate_runs_without_the_otel_extra() -> None:
    """Nothing imports OpenTelemetry's SDK or exporter until tracing is on; asking for it
    without the extra fails at start-up, naming the extra. (Its API comes with FastAPI.)"""
    script = """
import sys
# As if not installed.
sys.modules["opentelemetry.sdk"] = sys.modules["opentelemetry.exporter"] = None
import pydantic
from speechgate import tracing
from speechgate.api.app import create_app
from speechgate.wyoming import handler
from tests.helpers.settings import fake_settings
create_app(fake_settings())
with tracing.span(tracing.PLAN), tracing.request("openai"):
    tracing.job({}).end()
try:
    fake_settings(tracing={"otlp_endpoint": "http://127.0.0.1:4318"})
except pydantic.ValidationError as error:
    print(error)
"""
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert "tracing.otlp_endpoint needs opentelemetry.exporter" in ran.stdout
    assert "speechgate[otel]" in ran.stdout
