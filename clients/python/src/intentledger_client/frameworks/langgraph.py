"""A LangGraph graph paused on a call that waits for people's approval (extra ``[langgraph]``)::

    tools = structured_tools(client, catalog, approval=interrupt_while_awaiting_approval)

The tool calls ``langgraph.types.interrupt`` with what the user must be told (the tool, the
call, how many approvals by when, the handle): the graph stops, checkpointed, and
``graph.ainvoke(...)`` returns it under ``__interrupt__``. The approval itself is given in
intentledger (the console, ``intentledger approvals``), never by the resume value. Once it is,
``graph.ainvoke(Command(resume=True), config)`` re-runs the node: the same call is proposed
again under the same key, answered as its duplicate with the state it has reached, and if it
is still awaiting approval the interrupt returns at once and the tool waits for its settled
state on the handle. The user may instead take the call back:
``Command(resume={"withdraw": "why"})`` withdraws it (``Client.withdraw``), and the model is
told it was denied ``call_withdrawn``, or what it came to if people decided first. Needs a
checkpointer and a ``thread_id``, as every interrupt does.
"""

from __future__ import annotations

from collections.abc import Mapping

from langgraph.types import interrupt

from intentledger_client.frameworks.ledger import LedgerTool
from intentledger_client.outcomes import Outcome
from intentledger_client.pairing import approval_shown

KIND = "intentledger.awaiting_approval"
WITHDRAW = "withdraw"
"""The resume value's key that takes the call back, with the reason: ``{"withdraw": "why"}``."""


async def interrupt_while_awaiting_approval(tool: LedgerTool, outcome: Outcome) -> Outcome:
    resumed = interrupt({"kind": KIND, "tool": tool.definition.name, "call_id": outcome.call_id,
                         "approval": approval_shown(outcome.approval) if outcome.approval
                         else None, "handle": outcome.handle.model_dump(mode="json")})
    if isinstance(resumed, Mapping) and isinstance(reason := resumed.get(WITHDRAW), str):
        return await tool.client.withdraw(outcome.handle, reason, wait=tool.wait)
    return await tool.client.wait(outcome.handle, tool.wait)
