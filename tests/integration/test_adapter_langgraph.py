"""The LangChain/LangGraph adapter (``intentledger_client.frameworks.langchain``, ``.langgraph``)
on the whole pipeline, on real Kafka and PostgreSQL, in the graph of
``examples/langgraph_agent.py`` driven by LangChain's offline ``FakeMessagesListChatModel`` (no
network): the model's debit takes effect once; LangGraph re-executing the tools node from its
checkpoint (time travel: the same ToolCall id) is answered as the duplicate it is, paying
nothing more; a denied debit reaches the model as an error ToolMessage with its reason code; a
debit awaiting approval interrupts the graph, which resumes to the settled result once a person
approves it, or, resumed with a withdrawal, tells the model the call was withdrawn and pays
nothing."""

from __future__ import annotations

import json
import uuid

import pytest
from intentledger_client import Outcome
from intentledger_client.frameworks.langchain import structured_tools
from intentledger_client.frameworks.langgraph import (KIND, WITHDRAW,
                                                      interrupt_while_awaiting_approval)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command

from tests.support.agents import agent, tool_catalog
from tests.support.kafka import wait_for
from tests.support.examples import example
from tests.support.pipeline import answer, approve
from tests.support.pipeline_stack import pipeline
from tests.support.wallet import balance, debits, new_wallet

pytestmark = pytest.mark.infra


def tool_messages(state: dict) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


async def paused_on_a_big_debit(client, stage, run: str, wallet_id: str,
                                last_words: str) -> tuple:
    """The example's graph with approval by interrupt, its model debiting over the policy's cap
    and then saying ``last_words``, run to its interrupt: (graph, config, paused state)."""
    graphs = example("langgraph_agent.py")
    model = graphs.recorded_model(graphs.debit_call("call_big", wallet_id, "80.00"),
                                  AIMessage(last_words))
    tools = structured_tools(client, tool_catalog(stage), wait=120,
                             approval=interrupt_while_awaiting_approval)
    app, config = graphs.graph(model, tools), {"configurable": {"thread_id": run}}
    return app, config, await app.ainvoke({"messages": [HumanMessage("pay")]}, config)


async def test_a_tool_call_takes_effect_once_a_reexecuted_node_is_a_duplicate_and_denials_say_why(
        payer_stage, pool):
    stage, run, graphs = payer_stage.stage, f"run-{uuid.uuid4().hex[:10]}", example(
        "langgraph_agent.py")
    wallet_id = await new_wallet(pool, 10_000)
    model = graphs.recorded_model(graphs.debit_call("call_pay", wallet_id, "40.00"),
                                  graphs.debit_call("call_blocked", "blocked-1", "1.00"),
                                  AIMessage("done"))
    config = {"configurable": {"thread_id": run}}
    async with pipeline(stage), agent(stage, payer_stage.payer) as client:
        app = graphs.graph(model, structured_tools(client, tool_catalog(stage), wait=120))
        state = await app.ainvoke({"messages": [HumanMessage("pay")]}, config)
        [before_paying] = [s async for s in app.aget_state_history(config)
                           if s.next == ("tools",) and s.values["messages"][-1].tool_calls[0]
                           ["id"] == "call_pay"]
        model.i = 2  # after the re-executed tools node, the model answers in words
        replayed = await app.ainvoke(None, before_paying.config)
    paid, denied = tool_messages(state)["call_pay"], tool_messages(state)["call_blocked"]
    again = tool_messages(replayed)["call_pay"]
    assert (paid.status, json.loads(paid.content)["result"]["balance_minor"]) == ("success", 6_000)
    assert await balance(pool, wallet_id) == 6_000 and await debits(pool, wallet_id) == 1
    assert Outcome.model_validate(again.artifact).answer.outcome == "duplicate"
    assert json.loads(again.content) == json.loads(paid.content), "the one intent's result"
    assert denied.status == "error"
    assert json.loads(denied.content)["reason_code"] == "denied_by_rule"
    assert state["messages"][-1].content == "done"


async def test_a_call_awaiting_approval_interrupts_the_graph_and_resumes_once_approved(
        payer_stage, pool):
    stage, run = payer_stage.stage, f"run-{uuid.uuid4().hex[:10]}"
    wallet_id = await new_wallet(pool, 10_000)
    async with pipeline(stage), agent(stage, payer_stage.payer) as client:
        app, config, paused = await paused_on_a_big_debit(client, stage, run, wallet_id, "paid")
        [interrupted] = paused["__interrupt__"]
        assert await debits(pool, wallet_id) == 0, "nothing happens before a person approves"
        intent = (await answer(pool, stage, run, "call_big"))["payload"]
        await approve(stage, intent, "finance:a")
        resumed = await app.ainvoke(Command(resume=True), config)
    assert (interrupted.value["kind"], interrupted.value["call_id"]) == (KIND, "call_big")
    assert interrupted.value["approval"]["approvals_required"] == 1
    paid = tool_messages(resumed)["call_big"]
    assert (paid.status, json.loads(paid.content)["result"]["balance_minor"]) == ("success", 2_000)
    assert await debits(pool, wallet_id) == 1 and resumed["messages"][-1].content == "paid"


async def test_a_call_awaiting_approval_is_withdrawn_by_the_resume_value(payer_stage, pool):
    """The user takes the call back at the interrupt: ``Command(resume={"withdraw": ...})``.
    The re-run node proposes the call again (its duplicate, still awaiting) and withdraws it;
    the model reads it was denied ``call_withdrawn``, and a person's approval afterwards pays
    nothing."""
    stage, run = payer_stage.stage, f"run-{uuid.uuid4().hex[:10]}"
    wallet_id = await new_wallet(pool, 10_000)
    async with pipeline(stage), agent(stage, payer_stage.payer) as client:
        app, config, paused = await paused_on_a_big_debit(client, stage, run, wallet_id,
                                                          "not paid")
        assert paused["__interrupt__"], "the call waits for people"
        resumed = await app.ainvoke(Command(resume={WITHDRAW: "the user cancelled"}), config)
        intent = (await answer(pool, stage, run, "call_big"))["payload"]
        late = await approve(stage, intent, "finance:a")
        refused = await wait_for(lambda: pool.fetchval(
            "SELECT reason_code FROM policy.approvals WHERE approval_event_id = $1",
            late.event_id), timeout=60)
    withdrawn = tool_messages(resumed)["call_big"]
    assert withdrawn.status == "error"
    assert json.loads(withdrawn.content)["reason_code"] == "call_withdrawn"
    assert refused == "approval_not_pending"
    assert await debits(pool, wallet_id) == 0 and resumed["messages"][-1].content == "not paid"
