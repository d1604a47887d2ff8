"""Traces across Kafka (DESIGN.md §8): W3C trace context rides in every envelope.

An event records the trace context of the work that created it (``Envelope.new`` reads the
current span), the relay republishes it in the record's ``traceparent`` header, and whoever
applies the event continues the trace in a span of its own (``continuing``). One proposal can
so be followed across intake, policy, dispatcher, downstream and projection, however many
processes and hours lie between.

Spans are recorded by the OpenTelemetry SDK's tracer provider, installed once per process by
``install``; exporting them is the deployment's choice (``INTENTLEDGER_TRACES=console`` prints
them; an OTLP exporter can be added to the same provider).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()
_tracer = trace.get_tracer("intentledger")


def install(service: str) -> None:
    """Record spans in this process (ids are minted only by a real provider); idempotent."""
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if os.environ.get("INTENTLEDGER_TRACES") == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the span in progress, or None outside any recorded span."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


@contextmanager
def continuing(traceparent: str | None, name: str, **attributes: str) -> Iterator[None]:
    """A span for applying one event (or one step of a call), child of the trace the event
    carries; a new trace when it carries none."""
    parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else context.Context()
    with _tracer.start_as_current_span(name, context=parent, kind=trace.SpanKind.CONSUMER,
                                       attributes=attributes):
        yield


def trace_id_of(traceparent: str | None) -> str | None:
    parts = (traceparent or "").split("-")
    return parts[1] if len(parts) == 4 else None
