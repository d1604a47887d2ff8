"""Log records over OTLP, beside the JSON lines on stderr: with ``INTENTLEDGER_OTLP=1`` every
record a service logs reaches the collector's logs pipeline (``deploy/otel-collector.yaml``)
labelled with its service, the trace and span in progress, and the run, event and operation in
scope (``shared.logs.log_context``), so a backend can join a run's logs to its traces.

The exporter's own records (``opentelemetry.*``) are not exported: an export failure that logs
would otherwise feed the queue that failed.
"""

from __future__ import annotations

import logging

from opentelemetry.instrumentation.logging.handler import LoggingHandler
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.resources import Resource

from shared.logs import current_context


class _InScope(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("opentelemetry"):
            return False
        for name, value in current_context().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


def otlp_handler(resource: Resource, exporter: LogRecordExporter) -> LoggingHandler:
    """A handler for the root logger; its provider batches records to ``exporter``."""
    provider = LoggerProvider(resource=resource)
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    handler = LoggingHandler(logger_provider=provider)
    handler.addFilter(_InScope())
    return handler
