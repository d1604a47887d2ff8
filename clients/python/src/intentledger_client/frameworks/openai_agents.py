"""The registry's tools as OpenAI Agents SDK ``FunctionTool``s (extra ``[openai-agents]``)::

    tools = function_tools(client, catalog, run_id="conversation-42")
    agent = Agent(name="shop", instructions="...", tools=tools)
    result = await Runner.run(agent, "pay order 7")

Each invocation is a call of the ledger keyed by the run and the SDK's ``call_id``, which the
SDK keeps in its ``RunState``: a run resumed from a saved state, or run again, is answered with
the same intent's outcome. The tool returns text (the SDK would send a dict as its Python
repr): ``pairing.content`` of the outcome, so a denial reaches the model with its reason code
and a call awaiting approval with what to tell the user. The run id is the conversation's:
build the tools per conversation (``agent.clone(tools=...)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from intentledger_client.client import DEFAULT_WAIT_S, Client
from intentledger_client.frameworks.ledger import NOT_AN_OBJECT, LedgerTool, arguments_object, ledger_tools
from intentledger_client.pairing import content
from intentledger_client.tools import ToolDefinition


def function_tools(client: Client, catalog: Iterable[ToolDefinition], *, run_id: str,
                   wait: float = DEFAULT_WAIT_S) -> list[FunctionTool]:
    return [_function_tool(tool, run_id) for tool in ledger_tools(client, catalog, wait=wait)]


def _function_tool(tool: LedgerTool, run_id: str) -> FunctionTool:
    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        parsed = arguments_object(arguments)  # the SDK passes the model's text unparsed
        if parsed is None:
            return NOT_AN_OBJECT
        return content(await tool.call(run_id, context.tool_call_id, parsed))

    # Not strict: the SDK's strict mode would make every optional argument required.
    return FunctionTool(name=tool.name, description=tool.description,
                        params_json_schema=tool.schema, on_invoke_tool=invoke,
                        strict_json_schema=False)
