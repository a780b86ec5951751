"""OpenTelemetry traces: one per speech request, whichever front end it came through.

Off unless `Settings.tracing.otlp_endpoint` is set: until then every function hands out shared
do-nothing objects and OpenTelemetry is not imported. Spans go to a tracer provider of
speechgate's own, not the global one FastAPI's telemetry uses. A front end opens the root
(`request`); the serving path opens the children, found through the current context.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import Tracer

REQUEST = "speechgate.request"
"""The root: one request (HTTP), session (WebSocket) or synthesis (Wyoming)."""
ADMISSION = "speechgate.admission"
"""The key's limits: model list, rate, concurrency, quota (`Tenancy.admit`)."""
PLAN = "speechgate.plan"
"""Model, voice and format resolved, the voice pulled first where it is missing."""
PULL = "speechgate.pull"
"""A voice pulled from the hub while planning (`Settings.hub.auto_pull`)."""
ROUTE = "speechgate.route"
"""The router's choice among a route's providers; one `ATTEMPT` child per provider tried."""
ATTEMPT = "speechgate.route.attempt"
QUEUE = "speechgate.queue"
"""A job's admission into its engine's pool (the predicted wait) and its wait for a worker."""
FIRST_AUDIO = "speechgate.first_audio"
"""From the job reaching its worker to its first audio back."""
SYNTHESIS = "speechgate.synthesis"
"""From a job's first audio to its end."""
USAGE = "speechgate.usage"
"""The key's limits freed and the usage record written."""

Value = str | int | float | bool
Attributes = Mapping[str, Value]

_TRACER_NAME = "speechgate"
_tracer: Tracer | None = None


class Span:
    """A step of a request. This base class records nothing: it is handed out while tracing
    is off."""

    recording = False

    def set(self, attributes: Attributes) -> None: ...

    def fail(self, error: BaseException) -> None:
        """Mark the step failed by `error` (cancellation marks it cancelled instead)."""

    def end(self) -> None:
        """End the step, once."""

    def __enter__(self) -> Span:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None


NO_SPAN = Span()


def enabled() -> bool:
    return _tracer is not None


def span(name: str, attributes: Attributes | None = None) -> Span:
    """A child of the current span, current while its `with` block runs."""
    if _tracer is None:
        return NO_SPAN
    return _Current(_tracer.start_span(name, attributes=attributes))


class _Recorded(Span):
    recording = True

    def __init__(self, span: OtelSpan) -> None:
        self.otel = span
        self._ended = False

    def set(self, attributes: Attributes) -> None:
        self.otel.set_attributes(attributes)

    def fail(self, error: BaseException) -> None:
        from opentelemetry.trace import Status, StatusCode

        if isinstance(error, asyncio.CancelledError | GeneratorExit):
            self.otel.set_attribute("speechgate.cancelled", True)
            return
        self.otel.record_exception(error)
        code = getattr(error, "code", None)
        if isinstance(code, str):
            self.otel.set_attribute("speechgate.error.code", code)
        self.otel.set_status(Status(StatusCode.ERROR, type(error).__name__))

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self.otel.end()


class _Current(_Recorded):
    _token: object = None

    def __enter__(self) -> Span:
        from opentelemetry import context, trace

        self._token = context.attach(trace.set_span_in_context(self.otel))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        from opentelemetry import context

        if error is not None:
            self.fail(error)
        context.detach(self._token)  # type: ignore[arg-type]
        self.end()


class RequestSpan:
    """The root span of one request, current in its `with` block; a request that outlives the
    block (a Wyoming job's task) uses `attached` and `end`. This base class records nothing."""

    def attached(self) -> contextlib.AbstractContextManager[RequestSpan]:
        return contextlib.nullcontext(self)

    def describe(self, attributes: Attributes) -> None:
        """Add attributes; `speechgate.status` >= 500 marks the trace failed."""

    def end(self, status: int | None = None) -> None:
        """End the request, once, with its HTTP status unless `describe` gave it."""

    def __enter__(self) -> RequestSpan:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None


class _RecordedRequest(RequestSpan):
    def __init__(self, span: _Recorded) -> None:
        self.span = span
        self._status = False
        self._entered: contextlib.AbstractContextManager[RequestSpan] | None = None

    @contextlib.contextmanager
    def _attach(self) -> Iterator[RequestSpan]:
        from opentelemetry import context, trace

        token = context.attach(trace.set_span_in_context(self.span.otel))
        request = _request.set(self)
        try:
            yield self
        except BaseException as error:
            self.span.fail(error)
            raise
        finally:
            _request.reset(request)
            context.detach(token)

    def attached(self) -> contextlib.AbstractContextManager[RequestSpan]:
        return self._attach()

    def describe(self, attributes: Attributes) -> None:
        self.span.set(attributes)
        status = attributes.get("speechgate.status")
        if isinstance(status, int):
            self._status = True
            if status >= 500:
                from opentelemetry.trace import Status, StatusCode

                self.span.otel.set_status(Status(StatusCode.ERROR, f"status {status}"))

    def end(self, status: int | None = None) -> None:
        if status is not None and not self._status:
            self.describe({"speechgate.status": status})
        self.span.end()

    def __enter__(self) -> RequestSpan:
        self._entered = self._attach()
        return self._entered.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._entered is not None:
                self._entered.__exit__(kind, error, traceback)
        finally:
            self.end()


_NO_REQUEST = RequestSpan()
_request: ContextVar[RequestSpan] = ContextVar("speechgate_request", default=_NO_REQUEST)


def request(front_end: str, headers: Mapping[str, str] | None = None) -> RequestSpan:
    """A new request's root span, continuing the client's trace from a `traceparent` header."""
    if _tracer is None:
        return _NO_REQUEST
    parent = _extract(headers) if headers else None
    from opentelemetry.trace import SpanKind

    root = _tracer.start_span(
        REQUEST,
        context=parent,
        kind=SpanKind.SERVER,
        attributes={"speechgate.front_end": front_end},
    )
    return _RecordedRequest(_Recorded(root))


def describe_request(attributes: Attributes) -> None:
    """Add attributes to the current request's root span."""
    if _tracer is not None:
        _request.get().describe(attributes)


def _extract(headers: Mapping[str, str]) -> Context | None:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if "traceparent" not in headers:
        return None
    return TraceContextTextMapPropagator().extract(dict(headers))


def propagation_headers() -> dict[str, str]:
    """The current span as W3C trace context headers, for a request to an upstream."""
    if _tracer is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier


class Job:
    """One worker job's spans, children of the span current when it was created, as its later
    steps run wherever its audio is read. This base class records nothing."""

    def admitted(self, attributes: Attributes | None = None) -> None: ...

    def chunk(self, engine_elapsed: float, encoding: float, audio_seconds: float) -> None: ...

    def end(self, error: BaseException | None = None) -> None: ...


NO_JOB = Job()


def job(attributes: Attributes) -> Job:
    if _tracer is None:
        return NO_JOB
    return _RecordedJob(_tracer, attributes)


class _RecordedJob(Job):
    def __init__(self, tracer: Tracer, attributes: Attributes) -> None:
        from opentelemetry import context

        self._tracer = tracer
        self._parent = context.get_current()
        self._step: _Recorded | None = self._start(QUEUE, attributes)
        self._name = QUEUE
        self._chunks = 0
        self._encoding = 0.0
        self._audio = 0.0

    def _start(self, name: str, attributes: Attributes | None = None) -> _Recorded:
        return _Recorded(self._tracer.start_span(name, self._parent, attributes=attributes))

    def admitted(self, attributes: Attributes | None = None) -> None:
        if self._step is not None and self._name == QUEUE:
            self._step.set(attributes or {})
            self._step.end()
            self._step, self._name = self._start(FIRST_AUDIO), FIRST_AUDIO

    def chunk(self, engine_elapsed: float, encoding: float, audio_seconds: float) -> None:
        self._chunks += 1
        self._encoding += encoding
        self._audio += audio_seconds
        if self._step is not None and self._name == FIRST_AUDIO:
            self._step.set({"speechgate.engine_seconds": engine_elapsed})
            self._step.end()
            self._step, self._name = self._start(SYNTHESIS), SYNTHESIS

    def end(self, error: BaseException | None = None) -> None:
        step, self._step = self._step, None
        if step is None:
            return
        if self._name == SYNTHESIS:
            step.set(
                {
                    "speechgate.chunks": self._chunks,
                    "speechgate.audio_seconds": round(self._audio, 6),
                    "speechgate.encoding_seconds": round(self._encoding, 6),
                }
            )
        if error is not None:
            step.fail(error)
        step.end()


# --- exporting ----------------------------------------------------------------------------


def traces_url(endpoint: str) -> str:
    """Where OTLP/HTTP takes traces: `/v1/traces` is added to a base URL, as the standard
    `OTEL_EXPORTER_OTLP_ENDPOINT` does."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"


@contextlib.contextmanager
def exporting(endpoint: str) -> Iterator[None]:
    """Trace every request to `endpoint` over OTLP/HTTP until the block ends. Raises
    RuntimeError without the `otel` extra."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as error:
        raise RuntimeError(
            f"tracing.otlp_endpoint needs OpenTelemetry: pip install 'speechgate[otel]' ({error})"
        ) from None
    from speechgate import __version__

    provider = TracerProvider(
        resource=Resource.create({"service.name": "speechgate", "service.version": __version__})
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(traces_url(endpoint))))
    try:
        with installed(provider):
            yield
    finally:
        provider.shutdown()


@contextlib.contextmanager
def installed(provider: TracerProvider) -> Iterator[None]:
    """Trace with `provider` until the block ends (tests hand it an in-memory exporter)."""
    global _tracer
    previous = _tracer
    _tracer = provider.get_tracer(_TRACER_NAME)
    try:
        yield
    finally:
        _tracer = previous
