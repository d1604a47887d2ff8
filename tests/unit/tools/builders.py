"""Small registries for tests: one valid tool entry, changed one field at a time."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.tools import RegistryError, ToolRegistry, ToolSpec, load_registry, parse_registry

EXAMPLE_FILE = Path(__file__).resolve().parents[3] / "config" / "tools.example.yaml"

_ENTRY: dict[str, Any] = {
    "name": "ledger.post",
    "version": "1",
    "description": "Post a ledger line.",
    "arguments_schema": {
        "type": "object",
        "required": ["account", "amount", "currency"],
        "properties": {
            "account": {"type": "string"},
            "amount": {"type": ["string", "number"]},
            "currency": {"type": "string"},
            "note": {"type": "string"},
            "ref": {"type": "string"},
            "count": {"type": "integer"},
            "lines": {"type": "array", "items": {
                "type": "object", "required": ["price", "currency"],
                "properties": {"price": {"type": ["string", "number"]},
                               "currency": {"type": "string"},
                               "tags": {"type": "array", "items": {"type": "string"}}}}},
            "labels": {"type": "array", "items": {}},
            "at": {"type": "string"},
        },
    },
    "canonical": [],
    "key": {"scheme": "caller_stated"},
    "effect": "idempotent",
    "result_schema": {"type": "object"},
    "result_max_bytes": 1024,
    "retry": {"max_attempts": 3, "attempt_timeout_seconds": 2, "replay_safe": True,
              "key_retention_seconds": 3600},
    "reconciliation": "lookup_by_key",
    "topic": "effects.ledger",
}


def entry(**overrides: Any) -> dict[str, Any]:
    return copy.deepcopy(_ENTRY) | overrides


def registry_of(*entries: dict[str, Any]) -> ToolRegistry:
    return parse_registry(yaml.safe_dump({"tools": list(entries)}), "test.yaml")


def tool(**overrides: Any) -> ToolSpec:
    only = entry(**overrides)
    return registry_of(only).get(only["name"], only["version"])


def refusal(document: str | dict[str, Any]) -> str:
    text = document if isinstance(document, str) else yaml.safe_dump(document)
    with pytest.raises(RegistryError) as caught:
        parse_registry(text, "test.yaml")
    return str(caught.value)


@cache
def example() -> ToolRegistry:
    return load_registry(EXAMPLE_FILE)
