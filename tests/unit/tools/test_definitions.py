"""Tool definitions exported from the registry: each provider's shape, under a name the intake
resolves to the same tool, with the registry's argument schema unchanged. Each exported
definition is proposed back, as the provider would emit a call to it, through the intake's own
format parser and registry."""

from __future__ import annotations

import json

import pytest

from intentledger.cli import main
from intentledger.tool_definitions import catalog
from services.proposal_intake.formats import to_proposals
from intentledger_client.tools import CATALOG, FORMATS, export
from tests.unit.tools.builders import EXAMPLE_FILE, example as example_registry

WHO = {"run_id": "run-export", "principal_id": "agent-7", "tenant_id": "acme"}


def _call_as_provider(format: str, definition: dict) -> dict:
    """The message a model emits when it calls ``definition``, in the provider's own shape."""
    if format == "openai":
        name = definition["function"]["name"]
        return {"format": "openai.chat", "message": {"role": "assistant", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": name, "arguments": "{}"}}]}}
    if format == "openai-responses":
        return {"format": "openai.responses", "output": [
            {"type": "function_call", "id": "fc_1", "call_id": "call_1",
             "name": definition["name"], "arguments": "{}", "status": "completed"}]}
    if format == "anthropic":
        return {"format": "anthropic", "message": {"role": "assistant", "stop_reason": "tool_use",
                                                   "content": [{"type": "tool_use", "id": "toolu_1",
                                                                "name": definition["name"],
                                                                "input": {}}]}}
    # An MCP gateway proposes the tools/call it receives in the generic format.
    return {"format": "generic", "tool": definition["name"], "call_id": "mcp-1", "arguments": {}}


def _schema_of(format: str, definition: dict) -> dict:
    return {"openai": lambda d: d["function"]["parameters"],
            "openai-responses": lambda d: d["parameters"],
            "anthropic": lambda d: d["input_schema"],
            "mcp": lambda d: d["inputSchema"]}[format](definition)


@pytest.mark.parametrize("format", FORMATS)
def test_every_exported_tool_is_the_one_the_intake_resolves_from_a_call_to_it(format):
    registry = example_registry()
    exported = export(catalog(registry), format)
    assert len(exported) == len(registry.tools)
    for tool, definition in zip(registry.tools, exported, strict=True):
        [proposal] = to_proposals(WHO | _call_as_provider(format, definition))
        assert registry.resolve(proposal.tool_name, proposal.tool_version) == tool
        assert _schema_of(format, definition) == tool.arguments_schema


def test_names_follow_each_providers_rules():
    """OpenAI and Anthropic refuse dots: the registry's alias is the name; MCP keeps dots."""
    debit = next(d for d in catalog(example_registry()) if d.name == "wallet.debit")
    assert export([debit], "openai")[0]["function"]["name"] == "wallet_debit"
    assert export([debit], "openai-responses")[0]["name"] == "wallet_debit"
    assert export([debit], "anthropic")[0]["name"] == "wallet_debit"
    assert export([debit], "mcp")[0]["name"] == "wallet.debit"


def test_the_command_prints_each_format_and_the_catalogue_clients_export_from(capsys):
    assert main(["tools", "export", "--format", "catalog"]) == 0
    definitions = CATALOG.validate_json(capsys.readouterr().out)
    assert definitions == catalog(example_registry())
    for format in FORMATS:
        assert main(["tools", "export", "--format", format]) == 0
        assert json.loads(capsys.readouterr().out) == export(definitions, format)


def test_the_command_refuses_a_registry_it_cannot_export(tmp_path, capsys):
    registry = tmp_path / "tools.yaml"
    text = EXAMPLE_FILE.read_text()
    assert "aliases: [wallet_debit]" in text
    registry.write_text(text.replace("aliases: [wallet_debit]", "aliases: []"))
    assert main(["tools", "export", "--format", "openai", "--registry", str(registry)]) == 2
    assert "wallet.debit" in capsys.readouterr().err
