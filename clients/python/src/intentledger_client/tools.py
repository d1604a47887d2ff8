"""The deployment's tools as each model provider declares tools: the argument schema is written
once, in the deployment's registry, and the name a model is given is one the intake resolves.

The tools come as the deployment's catalogue (``intentledger tools export --format catalog``,
``schemas/tool-catalog.schema.json``): ``CATALOG.validate_json(text)`` reads it, and
``export(catalog, "anthropic")`` gives the model its ``tools=[…]``. The server's own
``intentledger tools export --format …`` is this very function over its registry.

A provider's name rules decide the name. OpenAI and Anthropic allow only letters, digits, ``_``
and ``-`` (at most 64), so ``wallet.debit`` is exported as the first alias the registry
declares that fits (``wallet_debit``); a tool with no such name is refused, never renamed by a
guess the intake would not resolve. MCP allows dots, so its tools keep their names. A tool the
deployment runs in several versions cannot be exported either: a proposal for it must state
``tool_version``, which no provider's tool definition can carry.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

Format = Literal["openai", "openai-responses", "anthropic", "mcp"]
FORMATS: tuple[Format, ...] = ("openai", "openai-responses", "anthropic", "mcp")
_NAMES = {"openai": re.compile(r"[A-Za-z0-9_-]{1,64}"),
          "openai-responses": re.compile(r"[A-Za-z0-9_-]{1,64}"),
          "anthropic": re.compile(r"[A-Za-z0-9_-]{1,64}"),
          "mcp": re.compile(r"[A-Za-z0-9_.-]{1,128}")}


class ToolDefinition(BaseModel):
    """What a model needs of one tool (``intentledger tools export --format catalog``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str
    description: str
    arguments_schema: dict[str, Any] = Field(description="JSON Schema (Draft 2020-12) of the "
                                             "arguments, as the intake validates them")
    result_schema: dict[str, Any] | None = Field(default=None, description=(
        "JSON Schema of the result fields a settled call returns"))
    aliases: tuple[str, ...] = ()


CATALOG = TypeAdapter(list[ToolDefinition])
"""A deployment's tool catalogue, as JSON: what a client exports provider definitions from."""


class NotExportable(ValueError):
    """A tool no provider definition can name so that the intake resolves it."""


def export(definitions: Iterable[ToolDefinition], format: Format) -> list[dict[str, Any]]:
    """One provider tool definition per tool, in the catalogue's order."""
    return [_SHAPES[format](tool, name) for name, tool in named(definitions, format)]


def named(definitions: Iterable[ToolDefinition], format: Format) -> list[tuple[str, ToolDefinition]]:
    """Each tool with the name the provider's model calls it by (the framework adapters give
    their tools these names too), refusing what no tool definition can express."""
    tools = list(definitions)
    versions = Counter(tool.name for tool in tools)
    if several := sorted(name for name, count in versions.items() if count > 1):
        raise NotExportable(f"{', '.join(several)}: the deployment runs several versions; a "
                            "proposal must state tool_version, which a tool definition cannot")
    return [(name_for(tool, format), tool) for tool in tools]


def name_for(tool: ToolDefinition, format: Format) -> str:
    """The tool's name if the provider allows it, else its first alias that the provider does."""
    fits = _NAMES[format].fullmatch
    name = next((name for name in (tool.name, *tool.aliases) if fits(name)), None)
    if name is None:
        raise NotExportable(f"{tool.name}: {format} tool names allow only {_NAMES[format].pattern}"
                            f"; declare an alias that fits in the registry (e.g. "
                            f"{re.sub(r'[^A-Za-z0-9_-]', '_', tool.name)!r})")
    return name


def _openai(tool: ToolDefinition, name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": tool.description,
                                             "parameters": tool.arguments_schema}}


def _openai_responses(tool: ToolDefinition, name: str) -> dict[str, Any]:
    return {"type": "function", "name": name, "description": tool.description,
            "parameters": tool.arguments_schema, "strict": False}


def _anthropic(tool: ToolDefinition, name: str) -> dict[str, Any]:
    return {"name": name, "description": tool.description, "input_schema": tool.arguments_schema}


def _mcp(tool: ToolDefinition, name: str) -> dict[str, Any]:
    """MCP's ``outputSchema`` must describe an object: other result schemas are left out."""
    shape = {"name": name, "description": tool.description, "inputSchema": tool.arguments_schema}
    if tool.result_schema is not None and tool.result_schema.get("type") == "object":
        shape["outputSchema"] = tool.result_schema
    return shape


_SHAPES: dict[str, Callable[[ToolDefinition, str], dict[str, Any]]] = {
    "openai": _openai, "openai-responses": _openai_responses, "anthropic": _anthropic,
    "mcp": _mcp}
