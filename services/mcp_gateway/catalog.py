"""The tools a caller is offered: the registry's, as MCP declares tools, each only to a caller
whose policy could ever allow it (``shared.policy.reach``).

MCP tool names allow dots, so a tool keeps its registry name, which the intake resolves as it
is. ``inputSchema`` is the registry's argument schema (with ``operation_key`` for a tool whose
key the caller states); ``outputSchema`` its result schema when
that describes an object (MCP's rule), and a settled result is exactly the fields it describes,
which the SDK's clients check. A tool the deployment runs in several versions is not offered:
a proposal for it must state ``tool_version``, which no MCP tool can carry.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import mcp_types as types
from intentledger_client.tools import export

from services.mcp_gateway.callers import Caller
from shared.policy.document import Policy
from shared.policy.reach import could_allow
from shared.tools import ToolRegistry, ToolSpec
from shared.tools.catalog import definition_of

KEY_ARGUMENT = "operation_key"
"""Added to the arguments of a tool whose key the caller states: a model can name its intent
itself (most MCP clients cannot set ``_meta``), and a retry under the same key is the same call.
Taken out before the call is proposed; never added to a tool that has an argument of that name."""
_KEY_PROPERTY = {"type": "string", "minLength": 1, "maxLength": 255, "description": (
    "Names this business intent (e.g. 'order-7:pay'): the same key again is the same call, "
    "answered with its outcome, never a second effect. A new intent needs a new key.")}
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
    return next((arguments_schema(t) for t in single_version(registry) if t.name == name), None)


def takes_key_argument(tool: ToolSpec) -> bool:
    properties = tool.arguments_schema.get("properties")
    return (tool.key.scheme == "caller_stated" and isinstance(properties, dict)
            and KEY_ARGUMENT not in properties)


def arguments_schema(tool: ToolSpec) -> dict[str, Any]:
    """The registry's argument schema, with ``operation_key`` where the caller states the key."""
    if not takes_key_argument(tool):
        return tool.arguments_schema
    schema = dict(tool.arguments_schema)
    schema["properties"] = {**schema["properties"], KEY_ARGUMENT: _KEY_PROPERTY}
    return schema


def split_key(tool: ToolSpec, arguments: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The tool's own arguments, and the key stated among them (if the tool takes one)."""
    if not takes_key_argument(tool) or KEY_ARGUMENT not in arguments:
        return arguments, None
    own = {name: value for name, value in arguments.items() if name != KEY_ARGUMENT}
    key = arguments[KEY_ARGUMENT]
    return own, key if isinstance(key, str) and key else None


def mcp_tool(tool: ToolSpec) -> types.Tool:
    """As ``intentledger tools export --format mcp`` declares it (``intentledger_client.tools``),
    with the gateway's ``operation_key`` argument and the registry's hints."""
    [shape] = export([definition_of(tool, arguments_schema(tool))], "mcp")
    return types.Tool(name=shape["name"], description=shape["description"],
                      input_schema=shape["inputSchema"], output_schema=shape.get("outputSchema"),
                      annotations=annotations(tool))


def annotations(tool: ToolSpec) -> types.ToolAnnotations:
    """Hints from the registry. The same arguments have no second effect when the tool is so
    itself or its key is derived from them (the caller's own key decides otherwise)."""
    return types.ToolAnnotations(
        read_only_hint=tool.effect == "read_only", destructive_hint=tool.effect == "irreversible",
        idempotent_hint=tool.effect in ("read_only", "idempotent")
        or tool.key.scheme in ("per_entity", "per_command"), open_world_hint=True)
