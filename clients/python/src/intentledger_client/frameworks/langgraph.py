"""A LangGraph graph paused on a call that waits for people's approval (extra ``[langgraph]``)::

    tools = structured_tools(client, catalog, approval=interrupt_while_awaiting_approval)

The tool calls ``langgraph.types.interrupt`` with what the user must be told (the tool, the
call, how many approvals by when, the handle): the graph stops, checkpointed, and
``graph.ainvoke(...)`` returns it under ``__interrupt__``. The approval itself is given in
intentledger (the console, ``intentledger approvals``), never by the resume value. Once it is,
``graph.ainvoke(Command(resume=True), config)`` re-runs the node: the same call is proposed
again under the same key, answered as its duplicate with the state it has reached, and if it
is still awaiting approval the interrupt returns at once and the tool waits for its settled
state on the handle. Needs a checkpointer and a ``thread_id``, as every interrupt does.
"""

from __future__ import annotations

from langgraph.types import interrupt

from intentledger_client.frameworks.ledger import LedgerTool
from intentledger_client.outcomes import Outcome
from intentledger_client.pairing import approval_shown

KIND = "intentledger.awaiting_approval"


async def interrupt_while_awaiting_approval(tool: LedgerTool, outcome: Outcome) -> Outcome:
    interrupt({"kind": KIND, "tool": tool.definition.name, "call_id": outcome.call_id,
               "approval": approval_shown(outcome.approval) if outcome.approval else None,
               "handle": outcome.handle.model_dump(mode="json")})
    return await tool.client.wait(outcome.handle, tool.wait)
