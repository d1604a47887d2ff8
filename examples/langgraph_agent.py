"""A LangGraph agent whose tools are intentledger's (``pip install
'intentledger-client[langgraph]'``): the registry's tools as ``StructuredTool``s in a
``ToolNode``, and a graph that pauses on a call awaiting people's approval and is resumed once
it is approved (docs/frameworks/langgraph.md).

The model here is LangChain's offline ``FakeMessagesListChatModel`` replaying one debit (no
network, no API key); put your chat model (``.bind_tools(tools)``) in its place. Run it
against the whole pipeline (``docker compose up``) with a wallet that exists::

    python examples/langgraph_agent.py --wallet tenant/acme/w-1 --signing-key agent-7.jwk \\
        --catalog catalog.json     # intentledger tools export --format catalog > catalog.json

A debit over the policy's cap waits for approval: the graph stops with an ``__interrupt__``
naming the call; approve it (the console, or ``intentledger approvals``) and press Enter, and
the graph resumes: the same call, under the same key, is answered with its settled result.
Type ``withdraw`` instead, and the call is taken back: it is denied ``call_withdrawn``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from intentledger_client import Client
from intentledger_client.frameworks.langchain import structured_tools
from intentledger_client.frameworks.langgraph import WITHDRAW, interrupt_while_awaiting_approval
from intentledger_client.tools import CATALOG


def graph(model: BaseChatModel, tools: list[BaseTool]) -> CompiledStateGraph:
    """agent -> tools -> agent, until the model answers in words; checkpointed (an interrupt
    needs it)."""
    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver())


def recorded_model(*turns: AIMessage) -> FakeMessagesListChatModel:
    return FakeMessagesListChatModel(responses=list(turns))


def debit_call(call_id: str, wallet_id: str, amount: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{
        "name": "wallet_debit", "id": call_id, "type": "tool_call",
        "args": {"wallet_id": wallet_id, "amount": amount, "currency": "EUR"}}])


async def main(args: argparse.Namespace) -> int:
    bootstrap = os.environ.get("INTENTLEDGER_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    catalog = CATALOG.validate_json(Path(args.catalog).read_text())
    model = recorded_model(debit_call("call_pay", args.wallet, args.amount), AIMessage("Paid."))
    config = {"configurable": {"thread_id": args.run}}  # the thread is the ledger's run
    async with Client(bootstrap, principal_id=args.principal, tenant_id=args.tenant,
                      signing_key=args.signing_key) as client:
        tools = structured_tools(client, catalog, approval=interrupt_while_awaiting_approval)
        app = graph(model, tools)
        state = await app.ainvoke({"messages": [HumanMessage("Pay the order.")]}, config)
        while state.get("__interrupt__"):
            print(json.dumps(state["__interrupt__"][0].value, indent=2))
            said = input("Approve the call in intentledger, then press Enter to resume"
                         " (or type withdraw to take it back): ")
            resume = {WITHDRAW: "withdrawn by the user"} if said.strip() == "withdraw" else True
            state = await app.ainvoke(Command(resume=resume), config)
    for message in state["messages"]:
        print(f"{message.type}: {message.content}")
    return 0


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=f"run-{uuid.uuid4().hex[:12]}")
    parser.add_argument("--tenant", default="acme")
    parser.add_argument("--principal", default="agent-7")
    parser.add_argument("--signing-key", metavar="FILE",
                        help="the principal's private JWK; default: $INTENTLEDGER_SIGNING_KEY_FILE")
    parser.add_argument("--catalog", required=True,
                        help="the output of `intentledger tools export --format catalog`")
    parser.add_argument("--wallet", required=True)
    parser.add_argument("--amount", default="80.00")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(arguments())))
