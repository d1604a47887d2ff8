"""Traces across Kafka (docs/design.md §8): W3C trace context rides in every envelope.

An event records the trace context of the work that created it (``Envelope.new`` reads the
current span), the relay republishes it in the record's ``traceparent`` header, and whoever
applies the event continues the trace in a span of its own (``continuing``). One proposal can
so be followed across intake, policy, dispatcher, downstream and projection, however many
processes and hours lie between.

Spans are recorded by the OpenTelemetry SDK's tracer provider that ``shared.telemetry``
installs once per process, which also decides where they are exported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import context, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()
_tracer = trace.get_tracer("intentledger")


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
