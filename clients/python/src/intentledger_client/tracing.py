"""The agent's trace, carried along: the W3C ``traceparent`` of the OpenTelemetry span in
progress, when the agent uses OpenTelemetry (it is no dependency of the client)."""

from __future__ import annotations

import importlib
from types import ModuleType

_propagate: ModuleType | None
try:
    _propagate = importlib.import_module("opentelemetry.propagate")
except ImportError:  # the agent records no traces
    _propagate = None


def current_traceparent() -> str | None:
    if _propagate is None:
        return None
    carrier: dict[str, str] = {}
    _propagate.inject(carrier)
    return carrier.get("traceparent")
