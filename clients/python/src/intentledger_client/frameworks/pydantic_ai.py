"""The registry's tools as a Pydantic AI ``FunctionToolset`` (extra ``[pydantic-ai]``)::

    toolset = ledger_toolset(client, catalog, run_id="conversation-42")
    result = await agent.run("pay order 7", toolsets=[toolset])

Each call is a call of the ledger keyed by the run and Pydantic AI's ``tool_call_id`` (never its
``ctx.run_id``, which changes when a run resumes). The model reads ``pairing.content`` of the
outcome; a denied or failed call is raised as ``ToolFailed``, so the model sees it as a failed
tool result with its reason code (and it spends no retry budget). The ``Outcome`` itself is the
``ToolReturn``'s metadata: the application reads it, the model never does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic_ai import FunctionToolset, RunContext, Tool, ToolFailed, ToolReturn

from intentledger_client.client import DEFAULT_WAIT_S, Client
from intentledger_client.frameworks.ledger import LedgerTool, ledger_tools
from intentledger_client.pairing import content, is_error
from intentledger_client.tools import ToolDefinition


def ledger_toolset(client: Client, catalog: Iterable[ToolDefinition], *, run_id: str,
                   wait: float = DEFAULT_WAIT_S) -> FunctionToolset[Any]:
    return FunctionToolset([_tool(tool, run_id) for tool in ledger_tools(client, catalog, wait=wait)])


def _tool(tool: LedgerTool, run_id: str) -> Tool[Any]:
    async def call(ctx: RunContext[Any], **arguments: Any) -> ToolReturn:
        if ctx.tool_call_id is None:
            raise ValueError("a ledger tool is called by the model, with a tool-call id")
        outcome = await tool.call(run_id, ctx.tool_call_id, arguments)
        if is_error(outcome):
            raise ToolFailed(content(outcome))
        return ToolReturn(return_value=json.loads(content(outcome)), metadata=outcome)

    return Tool.from_schema(call, name=tool.name, description=tool.description,
                            json_schema=tool.schema, takes_ctx=True)
