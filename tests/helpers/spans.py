"""Spans recorded in memory, and the names one speech request's trace is made of."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from speechgate import tracing

LIFECYCLE = {
    tracing.REQUEST,
    tracing.ADMISSION,
    tracing.PLAN,
    tracing.QUEUE,
    tracing.FIRST_AUDIO,
    tracing.SYNTHESIS,
    tracing.USAGE,
}
"""The spans of one request served by a local pool, whatever its front end."""
ROUTED = LIFECYCLE | {tracing.ROUTE, tracing.ATTEMPT}
"""Those of one request that a route sends to a provider."""


@contextmanager
def recorded_spans() -> Iterator[InMemorySpanExporter]:
    """Speechgate traces into the exporter this yields until the block ends."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        with tracing.installed(provider):
            yield exporter
    finally:
        provider.shutdown()
