"""The tools a caller is offered: the registry's, as MCP declares tools, each only to a caller
whose policy could ever allow it (``shared.policy.reach``).

MCP tool names allow dots, so a tool keeps its registry name, which the intake resolves as it
is. ``inputSchema`` is the registry's argument schema; ``outputSchema`` its result schema when
that describes an object (MCP's rule), and a settled result is exactly the fields it describes,
which the SDK's clients check. A tool the deployment runs in several versions is not offered:
a proposal for it must state ``tool_version``, which no MCP tool can carry.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import mcp_types as types

from services.mcp_gateway.callers import Caller
from shared.policy.document import Policy
from shared.policy.reach import could_allow
from shared.tools import ToolRegistry, ToolSpec

OUTCOME_TOOL = "intentledger.outcome"
"""The gateway's own tool: the outcome of a call answered pending, by its handle."""
_OUTCOME = types.Tool(
    name=OUTCOME_TOOL, description=(
        "The outcome of an earlier intentledger call that was answered pending (still in "
        "flight, or awaiting a person's approval): pass the handle it returned. Waits a while "
        "for it to settle, and answers pending again if it has not."),
    input_schema={"type": "object", "required": ["handle"], "additionalProperties": False,
                  "properties": {"handle": {"type": "object", "description": (
                      "The handle of the pending answer's structuredContent, as it was.")}}})


def offered(registry: ToolRegistry, policy: Policy, caller: Caller) -> list[types.Tool]:
    tools = [mcp_tool(tool) for tool in single_version(registry)
             if could_allow(policy, caller.principal_id, caller.tenant_id, tool.name,
                            tool_requires_approval=tool.requires_approval)]
    return [*tools, _OUTCOME]


def offers(registry: ToolRegistry, policy: Policy, caller: Caller, name: str) -> ToolSpec | None:
    """The registry's tool ``name`` if ``caller`` is offered it, else None."""
    return next((tool for tool in single_version(registry) if tool.name == name and could_allow(
        policy, caller.principal_id, caller.tenant_id, name,
        tool_requires_approval=tool.requires_approval)), None)


def single_version(registry: ToolRegistry) -> list[ToolSpec]:
    versions = Counter(tool.name for tool in registry.tools)
    return [tool for tool in registry.tools if versions[tool.name] == 1]


def input_schema(registry: ToolRegistry, name: str) -> dict[str, Any] | None:
    """For the SDK's header check, by name only (called before the caller is known)."""
    if name == OUTCOME_TOOL:
        return _OUTCOME.input_schema
    return next((t.arguments_schema for t in single_version(registry) if t.name == name), None)


# TODO(merge): the same rules as shared/tools/definitions.py's ``_mcp`` (main branch, `intentledger
# tools export --format mcp`); once that moves into the client package, build this from it.
def mcp_tool(tool: ToolSpec) -> types.Tool:
    output = tool.result_schema if tool.result_schema.get("type") == "object" else None
    return types.Tool(name=tool.name, description=tool.description,
                      input_schema=tool.arguments_schema, output_schema=output,
                      annotations=annotations(tool))


def annotations(tool: ToolSpec) -> types.ToolAnnotations:
    """Hints from the registry. The same arguments have no second effect when the tool is so
    itself or its key is derived from them (the caller's own key decides otherwise)."""
    return types.ToolAnnotations(
        read_only_hint=tool.effect == "read_only", destructive_hint=tool.effect == "irreversible",
        idempotent_hint=tool.effect in ("read_only", "idempotent")
        or tool.key.scheme in ("per_entity", "per_command"), open_world_hint=True)
