"""Orders for the dispatcher's HTTP adapter, built on the example registry's real tool specs."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, Literal

from services.dispatcher.adapters.orders import Order
from shared.tools import ToolSpec, load_registry
from tests.support.capabilities import capability_for

EXAMPLE_REGISTRY = Path(__file__).resolve().parents[2] / "config" / "tools.example.yaml"


@cache
def _example(name: str) -> ToolSpec:
    return load_registry(EXAMPLE_REGISTRY).get(name, "1")


def http_tool(url: str, name: str = "wallet.debit", **retry: Any) -> ToolSpec:
    """The example tool, reached over HTTP at ``url``; ``retry`` overrides its contract."""
    spec = _example(name)
    return spec.model_copy(update={"adapter": "http", "http_url": url,
                                   "retry": spec.retry.model_copy(update=retry)})


def order(tool: ToolSpec, key: str, arguments: dict | None = None, *,
          kind: Literal["send", "lookup"] = "send", run_id: str | None = None, fence: int = 1,
          attempt: int = 1, seconds: float = 10.0) -> Order:
    """A send carries the policy's capability for exactly this request."""
    call_id, arguments = uuid.uuid5(uuid.NAMESPACE_URL, key), arguments or {}
    capability = capability_for(key, tool.name, arguments, call_id, tool_version=tool.version)
    return Order(kind=kind, tool=tool, run_id=run_id or f"run-{key}", tenant_id="acme",
                 logical_call_id=call_id, operation_key=key,
                 canonical_arguments=arguments, attempt=attempt, fence=fence,
                 deadline_at=datetime.now(UTC) + timedelta(seconds=seconds),
                 capability=capability.model_dump(mode="json") if kind == "send" else None)
