"""Where a process's spans and metrics go: installed once per process, before any work.

Metrics are always readable by Prometheus: a pull reader fills this process's exposition
(``prometheus_client``'s registry), which the health port serves at ``/metrics``
(``shared.health``), so a cluster's Prometheus scrapes every service without a collector. The
names it serves are ``shared.metric_catalog``'s. A tracer provider is always installed (trace
ids are minted only by a real one, and events carry them across Kafka: ``shared.tracing``).

With ``INTENTLEDGER_OTLP=1`` spans, metrics and log records (``shared.log_export``) are also
exported over OTLP/gRPC to the collector at ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the standard
variable, one endpoint for every signal; default ``http://localhost:4317``, ``http://`` meaning
no TLS); the Prometheus reader stays, one meter provider feeding both. The exporters read the
other standard variables themselves (``OTEL_EXPORTER_OTLP_HEADERS``, ``_CERTIFICATE``,
``_TIMEOUT``; ``OTEL_METRIC_EXPORT_INTERVAL``, 60 s by default). Metrics are instruments on the global meter
provider, created at import anywhere in the code: they stay no-ops until it is set.
``INTENTLEDGER_TRACES=console`` prints every span instead (debugging).
"""

from __future__ import annotations

import logging
from typing import Literal

from opentelemetry import metrics, trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (BatchSpanProcessor, ConsoleSpanExporter,
                                            SimpleSpanProcessor)
from prometheus_client import REGISTRY, CollectorRegistry
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class TelemetrySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTENTLEDGER_", extra="ignore",
                                      populate_by_name=True)

    otlp: bool = False
    """Export traces and metrics over OTLP."""
    traces: Literal["console"] | None = None
    otlp_endpoint: str = Field(default="http://localhost:4317",
                               validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    otlp_protocol: Literal["grpc"] = Field(default="grpc",
                                           validation_alias="OTEL_EXPORTER_OTLP_PROTOCOL")
    """Only gRPC is installed (the collector's port 4317): anything else is refused at start,
    rather than exporting nowhere."""


def providers(service: str, settings: TelemetrySettings, registry: CollectorRegistry = REGISTRY
              ) -> tuple[TracerProvider, MeterProvider]:
    """The tracer and meter providers; ``registry``: where the Prometheus exposition is read."""
    resource = Resource.create({"service.name": service})
    tracer_provider = TracerProvider(resource=resource)
    if settings.traces == "console":
        tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    readers: list[MetricReader] = [PrometheusMetricReader(registry=registry)]
    if settings.otlp:
        # Imported only when used: gRPC is heavy to load for processes that export nothing.
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        endpoint = settings.otlp_endpoint
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint)))
    return tracer_provider, MeterProvider(resource=resource, metric_readers=readers)


def log_handler(service: str, settings: TelemetrySettings) -> logging.Handler | None:
    """The handler exporting log records over OTLP, when OTLP is on (``shared.log_export``)."""
    if not settings.otlp:
        return None
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter

    from shared.log_export import otlp_handler

    return otlp_handler(Resource.create({"service.name": service}),
                        OTLPLogExporter(endpoint=settings.otlp_endpoint))


def install(service: str, settings: TelemetrySettings | None = None) -> None:
    """Set this process's providers; idempotent (in-process tests start several services)."""
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return
    settings = settings or TelemetrySettings()
    tracer_provider, meter_provider = providers(service, settings)
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    if (handler := log_handler(service, settings)) is not None:
        logging.getLogger().addHandler(handler)
