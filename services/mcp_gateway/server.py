"""The MCP server: ``tools/list``, ``tools/call`` and the tasks of calls that outlast it
(``tasks``), and the status notifications of those tasks (``task_notifications``), for the
authenticated caller.

Built on the SDK's low-level ``Server``, whose handlers are asked per request: the list is
computed for each caller from the registry and the policy in force (both re-read on edit).
A tool the caller is not offered is unknown to it, whether it exists or not (an MCP error,
``-32602``), so a caller learns nothing of what others may do.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.shared.exceptions import MCPError

from services.mcp_gateway import catalog, results, tasks
from services.mcp_gateway.callers import Caller, CallerToken
from services.mcp_gateway.calls import Calls
from services.mcp_gateway.task_notifications import TaskNotifications
from shared.policy.document import Policy
from shared.tools import ToolRegistry

NAME = "intentledger"
INSTRUCTIONS = (
    "Tool calls here go through intentledger: each takes effect at most once per operation "
    "key (give one as the tool's operation_key argument, or in "
    "_meta['io.intentledger/operation_key'], and reuse it to retry safely), only if policy "
    "allows it. Some wait for people's approval (status awaiting_approval: tell the user) or "
    "are still in flight (pending): those answer with a handle, which the "
    "intentledger.outcome tool takes to fetch what the call came to.")


def mcp_server(registry: ToolRegistry, policy: Callable[[], Policy], calls: Calls,
               local: Caller | None = None) -> Server:
    """``local``: the one caller of a stdio server (no HTTP, no token); None on HTTP, where
    every caller is the one its verified token names."""

    def _caller() -> Caller:
        token = get_access_token()
        if isinstance(token, CallerToken):
            return token.caller
        if local is not None:
            return local
        raise MCPError(code=types.INVALID_REQUEST, message="not authenticated")

    async def list_tools(ctx: ServerRequestContext,
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=catalog.offered(registry, policy(), _caller()))

    async def call_tool(ctx: ServerRequestContext,
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        caller, arguments = _caller(), params.arguments or {}
        if params.name == catalog.OUTCOME_TOOL:
            return await calls.outcome(caller, arguments)
        tool = catalog.offers(registry, policy(), caller, params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name[:128]!r}")
        arguments, stated = catalog.split_key(tool, arguments)
        outcome = await calls.propose(caller, params.name, arguments, params.meta, stated)
        if outcome.handle.proposal_id is None:  # not acknowledged: no answer is its own
            return results.unacknowledged()
        if outcome.status in results.LATER and tasks.wanted(params.meta):
            return tasks.created(outcome)  # a non-core result type: passed as it is
        return results.answer(outcome)

    async def get_task(ctx: ServerRequestContext, params: types.GetTaskRequestParams):
        tasks.required(params.meta)
        return await later.get(_caller(), params.task_id)

    async def cancel_task(ctx: ServerRequestContext, params: types.CancelTaskRequestParams):
        tasks.required(params.meta)
        return await later.cancel(_caller(), params.task_id)

    async def listen(ctx: ServerRequestContext, params: types.SubscriptionsListenRequestParams):
        return await notifications.listen(ctx, _caller(), params)

    later, notifications = tasks.Tasks(calls), TaskNotifications(calls)
    server = _Server(NAME, version=version("intentledger"), instructions=INSTRUCTIONS,
                     on_list_tools=list_tools, on_call_tool=call_tool,
                     get_tool_input_schema=lambda name: catalog.input_schema(registry, name))
    server.extensions[tasks.EXTENSION] = {}
    server.add_request_handler("tasks/get", types.GetTaskRequestParams, get_task)
    server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, cancel_task)
    server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams,
                               listen)
    return server


class _Server(Server):
    """Announces no list changes: the SDK derives ``listChanged`` from a served
    ``subscriptions/listen``, which the gateway serves for task notifications only (its tool
    list is per caller and computed per request)."""

    def get_capabilities(self, *args: Any, **options: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **options)
        if capabilities.tools is None:
            return capabilities
        return capabilities.model_copy(update={"tools": types.ToolsCapability(list_changed=False)})
