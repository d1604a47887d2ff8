"""An agent loop on intentledger: each turn's tool calls are proposed, their settled results
handed back to the model, and the model takes its next turn, until it answers in words.

The model here is a recording (``RecordedModel``: no network, no API key), replaying what
chat completions returned for a shop order: turn 1 debits the customer's wallet and reserves
the stock in parallel; turn 2, having read the debit's id in the tool message, refunds it
(the customer cancelled). Swap in your provider's client: ``loop`` needs only a function from
the conversation so far to the next assistant message.

What the model reads after each call is data, never instructions: the call's status
(``succeeded``, ``failed``, ``denied``, ``needs_review`` or ``pending``), its stable reason
code and the tool's result fields as its result schema declares them. A call that has not
settled within the wait is ``pending``: the model is told so, and that proposing it again is
safe — each call's operation key names its business effect (the tool and its arguments), so
a repeated call is answered with the first one's result and never takes effect twice.

Run it against the whole pipeline (``docker compose up``, or each of relay, proposal-intake,
policy, dispatcher, projection, wallet and warehouse as ``intentledger serve <name>``), with a
wallet and a SKU that exist::

    python examples/agent_loop.py --wallet tenant/acme/w-1 --sku SKU-1 --signing-key agent-7.jwk
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from intentledger_client import Client, to_openai_tool_messages

Model = Callable[[list[dict[str, Any]]], Awaitable[dict[str, Any]]]
"""The conversation so far -> the next assistant message (chat completions' shape)."""


def operation_key(run_id: str, call: dict[str, Any]) -> str:
    """The call's business effect: its tool and arguments, whatever its provider call id."""
    function = call["function"]
    arguments = json.dumps(json.loads(function["arguments"]), sort_keys=True)
    digest = hashlib.sha256(f"{function['name']}\n{arguments}".encode()).hexdigest()[:24]
    return f"{run_id}:{digest}"


async def loop(client: Client, run_id: str, model: Model, user: str, *,
               wait: float = 60.0, max_turns: int = 8) -> list[dict[str, Any]]:
    """The conversation, until the model answers without tool calls (or ``max_turns``)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
    for _ in range(max_turns):
        assistant = await model(messages)
        messages.append(assistant)
        calls = assistant.get("tool_calls") or []
        if not calls:
            break
        outcomes = await client.propose_openai_chat(
            run_id, assistant, wait=wait,
            operation_keys={call["id"]: operation_key(run_id, call) for call in calls})
        messages.extend(to_openai_tool_messages(outcomes))  # the settled results, as data
    return messages


class RecordedModel:
    """What the model answered, turn by turn; turn 2 copies the debit id it was handed."""

    def __init__(self, wallet_id: str, sku: str, order_id: str) -> None:
        self.wallet_id, self.sku, self.order_id = wallet_id, sku, order_id

    async def __call__(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        results = {m["tool_call_id"]: json.loads(m["content"]) for m in messages
                   if m["role"] == "tool"}
        if not results:
            return _calls(("call_debit", "wallet_debit",
                           {"wallet_id": self.wallet_id, "amount": "40.00", "currency": "EUR"}),
                          ("call_hold", "inventory_reserve",
                           {"sku": self.sku, "order_id": self.order_id, "quantity": 2}))
        debit = results.get("call_debit", {})
        if "call_refund" not in results and debit.get("status") == "succeeded":
            return _calls(("call_refund", "wallet_refund", {
                "wallet_id": self.wallet_id, "debit_id": debit["result"]["debit_id"],
                "amount": "40.00", "currency": "EUR"}))
        return {"role": "assistant", "content": "Done: " + ", ".join(
            f"{call_id} {result['status']}" for call_id, result in results.items())}


def _calls(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}
        for call_id, name, arguments in calls]}


def statuses(messages: list[dict[str, Any]]) -> dict[str, str]:
    return {m["tool_call_id"]: json.loads(m["content"])["status"] for m in messages
            if m["role"] == "tool"}


async def main(args: argparse.Namespace) -> int:
    bootstrap = os.environ.get("INTENTLEDGER_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    model = RecordedModel(args.wallet, args.sku, f"tenant/{args.tenant}/o-{uuid.uuid4().hex[:8]}")
    async with Client(bootstrap, principal_id=args.principal, tenant_id=args.tenant,
                      signing_key=args.signing_key) as client:
        messages = await loop(client, args.run, model, "Order two of SKU for me, then cancel.",
                              wait=args.wait)
    for message in messages:
        print(json.dumps(message))
    return 0 if all(s == "succeeded" for s in statuses(messages).values()) else 1


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=f"run-{uuid.uuid4().hex[:12]}")
    parser.add_argument("--tenant", default="acme")
    parser.add_argument("--principal", default="agent-7")
    parser.add_argument("--signing-key", metavar="FILE",
                        help="the principal's private JWK; default: $INTENTLEDGER_SIGNING_KEY_FILE")
    parser.add_argument("--wallet", required=True)
    parser.add_argument("--sku", required=True)
    parser.add_argument("--wait", type=float, default=60.0,
                        help="seconds to wait for each turn's results; then 'pending'")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(arguments())))
