"""The four shapes a proposal may take on ``agent.proposals`` (``schemas/agent.proposals``):
the provider's own message, as its API returned it, wrapped with the call ids it carries.

Operation keys (provider call id → key) name each call's business effect: a retried turn
proposed under the same keys is answered as a duplicate of the same intents, never performed
twice.
"""

from __future__ import annotations

from typing import Any

Proposal = tuple[dict[str, Any], list[str]]
"""The message to send and its call ids, in the provider's order."""


def generic(tool: str, arguments: dict[str, Any], *, call_id: str, tool_version: str | None,
            operation_key: str | None) -> dict[str, Any]:
    return _with({"format": "generic", "tool": tool, "call_id": call_id, "arguments": arguments},
                 tool_version=tool_version, operation_key=operation_key)


def openai_chat(message: dict[str, Any], operation_keys: dict[str, str] | None,
                tool_version: str | None) -> Proposal:
    call_ids = [str(call["id"]) for call in message.get("tool_calls") or []]
    return _with({"format": "openai.chat", "message": message}, operation_keys=operation_keys,
                 tool_version=tool_version), call_ids


def openai_responses(output: list[dict[str, Any]] | dict[str, Any],
                     operation_keys: dict[str, str] | None, tool_version: str | None) -> Proposal:
    items = output if isinstance(output, list) else [output]
    call_ids = [str(item["call_id"]) for item in items if item.get("type") == "function_call"]
    return _with({"format": "openai.responses", "output": output}, operation_keys=operation_keys,
                 tool_version=tool_version), call_ids


def anthropic(message: dict[str, Any], operation_keys: dict[str, str] | None,
              tool_version: str | None) -> Proposal:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    call_ids = [str(block["id"]) for block in blocks if block.get("type") == "tool_use"]
    return _with({"format": "anthropic", "message": message}, operation_keys=operation_keys,
                 tool_version=tool_version), call_ids


def _with(message: dict[str, Any], **optional: Any) -> dict[str, Any]:
    return message | {name: value for name, value in optional.items() if value is not None}
