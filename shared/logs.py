"""Structured logs: one JSON object per line, carrying the run, event and operation in scope.

Handlers set the context once (``log_context(run_id=..., event_id=...)``) and every log line
inside inherits it, so an operator can grep one run across all services.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from types import MappingProxyType

_context: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "log_context", default=MappingProxyType({}))


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    token = _context.set({**_context.get(), **{k: str(v) for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def current_context() -> Mapping[str, str]:
    """The fields in scope (run, event, operation, service): every exported copy of a log line
    carries them too."""
    return _context.get()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_context.get(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line)


def configure_logging(level: str = "INFO", service: str | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("aiokafka").setLevel(logging.WARNING)
    if service:
        _context.set({"service": service})
