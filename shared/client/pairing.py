"""Turning outcomes back into the provider's pairing format, so an agent loop can continue.

The model sees data, never instructions: outcomes are serialized as JSON text, and nothing a
tool returned is promoted to a system or developer message.
"""

from __future__ import annotations

import json
from typing import Any

from shared.client.agent import Outcome


def _content(outcome: Outcome) -> str:
    shown = {k: outcome.payload.get(k) for k in ("outcome", "reason_code", "message",
                                                  "logical_call_id", "state") if outcome.payload.get(k)}
    return json.dumps(shown or {"outcome": outcome.status})


def to_openai_tool_messages(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Chat Completions: one ``{"role": "tool", "tool_call_id": ...}`` message per call."""
    return [{"role": "tool", "tool_call_id": o.call_id, "content": _content(o)} for o in outcomes]


def to_anthropic_tool_results(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Messages API: ``tool_result`` blocks for the next user turn, errors flagged."""
    return [{"type": "tool_result", "tool_use_id": o.call_id, "content": _content(o),
             "is_error": o.status == "rejected"} for o in outcomes]
