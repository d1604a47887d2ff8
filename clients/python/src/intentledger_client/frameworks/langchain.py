"""The registry's tools as LangChain ``StructuredTool``s (extra ``[langchain]``), for a LangGraph
``ToolNode`` as well (extra ``[langgraph]``)::

    tools = structured_tools(client, catalog)             # the run: the graph's thread_id
    graph.add_node("tools", ToolNode(tools))

Each call is a call of the ledger keyed by the run and the ``ToolCall``'s ``id``, which LangGraph
keeps in the checkpointed ``AIMessage``: a node re-executed on resume, or a graph run again from a
checkpoint, is answered with the same intent's outcome. The run is ``run_id`` if given, else the
``thread_id`` of the graph's configuration. The tool answers a ``ToolMessage`` whose content is
``pairing.content`` of the outcome (``status="error"`` for a denied or failed call, so the model
sees it as one, with its reason code) and whose ``artifact`` is the ``Outcome`` as JSON (any
checkpointer stores it; ``Outcome.model_validate(message.artifact)`` reads it back), never sent to
the model.

A call awaiting approval is told to the model as such, unless ``approval`` says what to do with
it: ``langgraph.interrupt_while_awaiting_approval`` pauses the graph until it is resumed.

The tools are async only (LangChain's sync ``invoke`` of them raises): the client is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool

from intentledger_client.client import DEFAULT_WAIT_S, Client
from intentledger_client.frameworks.ledger import LedgerTool, ledger_tools
from intentledger_client.outcomes import Outcome
from intentledger_client.pairing import content, is_error
from intentledger_client.tools import ToolDefinition

Approval = Callable[[LedgerTool, Outcome], Awaitable[Outcome]]
"""A call awaiting approval → what it came to (or an exception that pauses the caller)."""

_INVOKED: ContextVar[tuple[str | None, RunnableConfig | None]] = ContextVar(
    "intentledger_tool_call", default=(None, None))
"""The ToolCall's id and the configuration of the invocation running in this context."""


class LedgerStructuredTool(StructuredTool):
    """A ``StructuredTool`` that knows the id of the ``ToolCall`` it was invoked with: LangChain
    hands it to ``arun`` only (the coroutine sees just the arguments)."""

    async def arun(self, tool_input: str | dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        invoked = _INVOKED.set((kwargs.get("tool_call_id"), kwargs.get("config")))
        try:
            return await super().arun(tool_input, *args, **kwargs)
        finally:
            _INVOKED.reset(invoked)


def structured_tools(client: Client, catalog: Iterable[ToolDefinition], *,
                     run_id: str | None = None, approval: Approval | None = None,
                     wait: float = DEFAULT_WAIT_S) -> list[StructuredTool]:
    return [_structured_tool(tool, run_id, approval)
            for tool in ledger_tools(client, catalog, wait=wait)]


def _structured_tool(tool: LedgerTool, run_id: str | None,
                     approval: Approval | None) -> StructuredTool:
    async def call(**arguments: Any) -> ToolMessage:
        tool_call_id, config = _INVOKED.get()
        if tool_call_id is None:
            raise ValueError(f"{tool.name}: invoke it with the model's ToolCall (its id keys the "
                             "intent), as a ToolNode does")
        run = run_id or _thread_id(config)
        outcome = await tool.call(run, tool_call_id, arguments)
        if outcome.status == "awaiting_approval" and approval is not None:
            outcome = await approval(tool, outcome)
        return ToolMessage(content=content(outcome), artifact=outcome.model_dump(mode="json"),
                           tool_call_id=tool_call_id,
                           name=tool.name, status="error" if is_error(outcome) else "success")

    return LedgerStructuredTool(name=tool.name, description=tool.description,
                                args_schema=tool.schema, coroutine=call)


def _thread_id(config: RunnableConfig | None) -> str:
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    if not isinstance(thread, str) or not thread:
        raise ValueError("no run id: give structured_tools run_id=, or run the graph with "
                         "config={'configurable': {'thread_id': ...}}")
    return thread
