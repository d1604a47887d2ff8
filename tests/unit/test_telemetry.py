"""OTLP export, against an in-process OTLP/gRPC receiver: with ``INTENTLEDGER_OTLP=1`` a process's
spans, metrics and log records reach the collector its ``OTEL_EXPORTER_OTLP_ENDPOINT`` names,
labelled with the service (a log record with its run and trace too), while Prometheus'
exposition keeps the metrics; without it nothing is exported and metrics stay readable at
``/metrics``; an exporter protocol that is not installed is refused instead of exporting
nowhere."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import grpc
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from shared.logs import log_context
from shared.telemetry import TelemetrySettings, log_handler, providers


@dataclass
class Received:
    spans: list[tuple[str, str]] = field(default_factory=list)
    """(service.name, span name)"""
    metrics: list[tuple[str, str]] = field(default_factory=list)
    """(service.name, metric name)"""
    logs: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    """(service.name, body, string attributes, trace id)"""


def scraped(registry: CollectorRegistry, sample: str) -> list[float]:
    """The values of one sample name in the exposition Prometheus would scrape."""
    return [item.value for family in text_string_to_metric_families(generate_latest(registry).decode())
            for item in family.samples if item.name == sample]


def _service(resource) -> str:
    return next(a.value.string_value for a in resource.attributes if a.key == "service.name")


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request, context):  # noqa: N802 - the gRPC method's name
        self.received.spans += [(_service(r.resource), span.name) for r in request.resource_spans
                                for scope in r.scope_spans for span in scope.spans]
        return trace_service_pb2.ExportTraceServiceResponse()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request, context):  # noqa: N802
        self.received.metrics += [(_service(r.resource), metric.name)
                                  for r in request.resource_metrics
                                  for scope in r.scope_metrics for metric in scope.metrics]
        return metrics_service_pb2.ExportMetricsServiceResponse()


class _Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request, context):  # noqa: N802
        self.received.logs += [
            (_service(r.resource), record.body.string_value,
             {a.key: a.value.string_value for a in record.attributes}, record.trace_id)
            for r in request.resource_logs for scope in r.scope_logs for record in scope.log_records]
        return logs_service_pb2.ExportLogsServiceResponse()


@pytest.fixture
def collector() -> Iterator[tuple[str, Received]]:
    """An OTLP/gRPC receiver on a free loopback port, as the collector's 4317 is."""
    received = Received()
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(received), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(received), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_Logs(received), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"http://127.0.0.1:{port}", received
    server.stop(grace=None)


def test_spans_and_metrics_reach_the_collector(collector, monkeypatch):
    endpoint, received = collector
    monkeypatch.setenv("INTENTLEDGER_OTLP", "1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")  # as compose sets it
    registry = CollectorRegistry()
    tracer_provider, meter_provider = providers("dispatcher", TelemetrySettings(), registry)
    try:
        with tracer_provider.get_tracer("test").start_as_current_span("ledger.authorizations process"):
            pass
        meter_provider.get_meter("test").create_counter("consumer.applied").add(3)
        assert scraped(registry, "consumer_applied_total") == [3], "OTLP leaves /metrics as it is"
        assert tracer_provider.force_flush(10_000) and meter_provider.force_flush(10_000)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()
    assert received.spans == [("dispatcher", "ledger.authorizations process")]
    assert ("dispatcher", "consumer.applied") in received.metrics


def test_without_otlp_nothing_is_exported_and_metrics_stay_readable_by_prometheus(monkeypatch):
    monkeypatch.delenv("INTENTLEDGER_OTLP", raising=False)
    registry = CollectorRegistry()
    tracer_provider, meter_provider = providers("relay", TelemetrySettings(), registry)
    try:
        assert not tracer_provider._active_span_processor._span_processors
        meter_provider.get_meter("test").create_counter("relay.published").add(2)
        assert scraped(registry, "relay_published_total") == [2]
    finally:
        meter_provider.shutdown()


def test_an_exporter_protocol_that_is_not_installed_is_refused(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    with pytest.raises(ValidationError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        TelemetrySettings()


def test_log_records_reach_the_collector_with_their_run_and_trace(collector, monkeypatch):
    endpoint, received = collector
    monkeypatch.setenv("INTENTLEDGER_OTLP", "1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    handler = log_handler("policy", TelemetrySettings())
    tracer_provider, meter_provider = providers("policy", TelemetrySettings(), CollectorRegistry())
    logger = logging.getLogger("test.otlp_logs")
    logger.addHandler(handler)
    try:
        with tracer_provider.get_tracer("test").start_as_current_span("decide") as span, \
                log_context(run_id="run-7", event_id="e-1"):
            logger.warning("denied %s", "call-1")
        logging.getLogger("opentelemetry.exporter.test").warning("export failed")
        assert handler._logger_provider.force_flush(10_000)
    finally:
        logger.removeHandler(handler)
        handler._logger_provider.shutdown()
        tracer_provider.shutdown()
        meter_provider.shutdown()
    [(service, body, attributes, trace_id)] = received.logs
    assert (service, body) == ("policy", "denied call-1")
    assert (attributes["run_id"], attributes["event_id"]) == ("run-7", "e-1")
    assert trace_id == span.get_span_context().trace_id.to_bytes(16, "big")


def test_without_otlp_logs_stay_on_stderr_only(monkeypatch):
    monkeypatch.delenv("INTENTLEDGER_OTLP", raising=False)
    assert log_handler("policy", TelemetrySettings()) is None
