"""Provider tool definitions from a deployment's catalogue: each provider's name rules, the
refusals that keep the intake resolving every exported name, MCP's output schema."""

from __future__ import annotations

from typing import Any

import pytest

from intentledger_client.tools import CATALOG, Format, NotExportable, ToolDefinition, export


def _tool(**fields: Any) -> ToolDefinition:
    return ToolDefinition(**{"name": "ledger.post", "version": "1", "description": "Post.",
                             "arguments_schema": {"type": "object"}} | fields)


@pytest.mark.parametrize("format", ["openai", "openai-responses", "anthropic"])
def test_a_dotted_tool_without_a_fitting_alias_is_refused_not_renamed(format: Format) -> None:
    with pytest.raises(NotExportable, match="declare an alias"):
        export([_tool(aliases=("ledger.post.v1",))], format)
    assert export([_tool()], "mcp")[0]["name"] == "ledger.post"


def test_a_tool_run_in_several_versions_is_refused() -> None:
    with pytest.raises(NotExportable, match="several versions"):
        export([_tool(), _tool(version="2")], "mcp")


def test_mcp_gets_an_output_schema_only_where_the_result_is_an_object() -> None:
    result = {"type": "object", "properties": {"debit_id": {"type": "string"}}}
    assert export([_tool(result_schema=result)], "mcp")[0]["outputSchema"] == result
    assert "outputSchema" not in export([_tool(result_schema={"type": "string"})], "mcp")[0]
    assert "outputSchema" not in export([_tool()], "mcp")[0]


def test_openai_responses_definitions_are_not_strict() -> None:
    """Strict mode needs every property required and no open schemas; the registry's schemas
    have optional fields (a debit's memo), which strict mode would refuse."""
    assert export([_tool(name="ledger_post")], "openai-responses")[0]["strict"] is False


def test_a_catalogue_round_trips_through_its_json() -> None:
    tools = [_tool(aliases=("ledger_post",), result_schema={"type": "object"})]
    assert CATALOG.validate_json(CATALOG.dump_json(tools)) == tools
    assert export(CATALOG.validate_json(CATALOG.dump_json(tools)), "anthropic")[0]["name"] == (
        "ledger_post")
