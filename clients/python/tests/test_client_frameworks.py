"""The framework adapters' own rules, on a client that records what it is asked to propose
(no broker; the end-to-end tests are tests/integration/test_adapter_*.py): each tool is offered
under a name every provider accepts and proposed under the registry's; the key is
``call_key(run, tool-call id)``; what cannot be keyed or parsed is never proposed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents.tool_context import ToolContext
from langchain_core.messages import ToolMessage

from intentledger_client import Client, Handle, Outcome
from intentledger_client.frameworks.langchain import structured_tools
from intentledger_client.frameworks.ledger import NOT_AN_OBJECT, ledger_tools
from intentledger_client.frameworks.openai_agents import function_tools
from intentledger_client.keys import call_key
from intentledger_client.tools import NotExportable, ToolDefinition

DEBIT = ToolDefinition(name="wallet.debit", version="1", description="Debit a wallet.",
                       arguments_schema={"type": "object"}, aliases=("wallet_debit",))


class Recording(Client):
    """Answers every call ``succeeded`` at once, keeping what it was asked."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1:1", principal_id="agent-7", tenant_id="acme")
        self.calls: list[dict[str, Any]] = []

    async def call(self, run_id: str, tool: str, arguments: dict[str, Any], *, call_id: str,
                   tool_version: str | None = None, operation_key: str | None = None,
                   wait: float = 30.0, settle: bool = True) -> Outcome:
        self.calls.append({"run_id": run_id, "tool": tool, "arguments": arguments,
                           "call_id": call_id, "operation_key": operation_key})
        handle = Handle(tenant_id="acme", run_id=run_id, call_id=call_id, proposal_id=None,
                        operation_key=operation_key)
        return Outcome(status="succeeded", handle=handle)


def test_a_tool_is_offered_by_its_alias_and_proposed_by_its_registry_name() -> None:
    [tool] = ledger_tools(Recording(), [DEBIT])
    assert (tool.name, tool.definition.name) == ("wallet_debit", "wallet.debit")
    with pytest.raises(NotExportable):
        ledger_tools(Recording(), [DEBIT.model_copy(update={"aliases": ()})])


async def test_an_agents_call_is_keyed_by_the_run_and_the_sdks_call_id() -> None:
    client = Recording()
    [tool] = function_tools(client, [DEBIT], run_id="conv-1")
    context: ToolContext[None] = ToolContext(None, tool_name="wallet_debit", tool_call_id="c1",
                                             tool_arguments='{"amount": "1.00"}')
    answered = await tool.on_invoke_tool(context, '{"amount": "1.00"}')
    assert json.loads(answered)["status"] == "succeeded"
    assert client.calls == [{"run_id": "conv-1", "tool": "wallet.debit",
                             "arguments": {"amount": "1.00"}, "call_id": "c1",
                             "operation_key": call_key("conv-1", "c1")}]


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]"])
async def test_agents_arguments_that_are_no_json_object_are_never_proposed(arguments: str) -> None:
    client = Recording()
    [tool] = function_tools(client, [DEBIT], run_id="conv-1")
    context: ToolContext[None] = ToolContext(None, tool_name="wallet_debit", tool_call_id="c1",
                                             tool_arguments=arguments)
    assert await tool.on_invoke_tool(context, arguments) == NOT_AN_OBJECT
    assert client.calls == []


async def test_a_langchain_call_takes_its_run_from_the_graphs_thread() -> None:
    client = Recording()
    [tool] = structured_tools(client, [DEBIT])
    message = await tool.ainvoke({"name": "wallet_debit", "args": {"amount": "1.00"}, "id": "c1",
                                  "type": "tool_call"}, {"configurable": {"thread_id": "t-9"}})
    assert isinstance(message, ToolMessage) and message.status == "success"
    assert Outcome.model_validate(message.artifact).handle.operation_key == call_key("t-9", "c1")
    assert [(c["run_id"], c["call_id"]) for c in client.calls] == [("t-9", "c1")]


async def test_a_langchain_call_with_no_tool_call_id_or_no_run_is_refused_not_proposed() -> None:
    client = Recording()
    [tool] = structured_tools(client, [DEBIT])
    with pytest.raises(ValueError, match="ToolCall"):
        await tool.ainvoke({"amount": "1.00"})  # plain arguments: no id to key the intent by
    with pytest.raises(ValueError, match="thread_id"):
        await tool.ainvoke({"name": "wallet_debit", "args": {}, "id": "c1", "type": "tool_call"})
    assert client.calls == []
