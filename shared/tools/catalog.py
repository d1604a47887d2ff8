"""The registry's tools as the neutral definitions a model is given (``intentledger_client.tools``
makes each provider's shape of them): the one place a ``ToolSpec`` becomes a ``ToolDefinition``,
for ``intentledger tools export`` and the MCP gateway alike."""

from __future__ import annotations

from typing import Any

from intentledger_client.tools import ToolDefinition

from shared.tools.registry import ToolRegistry
from shared.tools.spec import ToolSpec


def definition_of(tool: ToolSpec, arguments_schema: dict[str, Any] | None = None) -> ToolDefinition:
    """``arguments_schema``: what the model is shown instead of the registry's (the gateway adds
    its ``operation_key`` argument)."""
    return ToolDefinition(name=tool.name, version=tool.version, description=tool.description,
                          arguments_schema=arguments_schema or tool.arguments_schema,
                          result_schema=tool.result_schema, aliases=tool.aliases)


def catalog(registry: ToolRegistry) -> list[ToolDefinition]:
    return [definition_of(tool) for tool in registry.tools]
