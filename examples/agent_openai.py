"""An agent proposing the tool calls of an OpenAI chat-completions turn, with the agent client
(``clients/python``, ``pip install ./clients/python``), and handing the model their results.

What it shows: the assistant message is sent as the model returned it (the raw ``tool_calls``
list, arguments as a JSON string), and each call's outcome comes back paired by its
``tool_call_id``, as the ``role: tool`` messages of the next request to the model. The turn
holds two calls: a debit of the ``wallet.debit`` tool of ``config/tools.example.yaml`` (OpenAI
function names cannot contain a dot, so the model calls it by its alias ``wallet_debit``),
and a call of a tool that no registry declares, which the intake refuses: ``denied``,
``reason_code=unknown_tool``. The debit waits for its settled result (``succeeded`` with the
new balance, ``failed`` with a reason, ...) unless ``--answered`` stops at the intake's answer:
``accepted`` (an intent now exists, its id is ``logical_call_id``) or ``duplicate`` (an intent
with this operation key already exists: nothing new will happen).

Run it (Kafka and PostgreSQL from ``intentledger infra up``, or set
``INTENTLEDGER_KAFKA_BOOTSTRAP``; the services must be running: the intake and a relay for
``--answered``, the whole pipeline for the settled result)::

    python examples/agent_openai.py --operation-key order-7:debit --signing-key user-42.jwk

Every record is signed with the principal's private key (``--signing-key``, or the
``INTENTLEDGER_SIGNING_KEY_FILE`` environment variable): the intake believes the signature, not
the ``principal_id`` in the JSON (docs/identity.md). Make one with ``intentledger keys
generate`` and list its public half in the intake's principals file.

Run it again with the same ``--run`` and ``--operation-key``: the debit is answered
``duplicate``, with the same intent id, and its result is the first debit's. The operation key
is what makes a retried turn safe: it names the business effect, so a model that repeats
itself cannot pay twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid

from intentledger_client import Client, Outcome, to_openai_tool_messages


def assistant_turn(wallet_id: str, amount: str) -> dict:
    """An assistant message exactly as chat completions returns it."""
    debit = {"wallet_id": wallet_id, "amount": amount, "currency": "EUR", "memo": "order 7"}
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_debit", "type": "function",
         "function": {"name": "wallet_debit", "arguments": json.dumps(debit)}},
        {"id": "call_teleport", "type": "function",
         "function": {"name": "wallet_teleport", "arguments": json.dumps({"to": "mars"})}},
    ]}


def describe(outcome: Outcome) -> str:
    """One line per call: its id, what it came to, and what identifies or explains it."""
    if outcome.status == "pending" and outcome.ledger_status in ("accepted", "duplicate"):
        return f"{outcome.call_id} {outcome.ledger_status} logical_call_id={outcome.handle.logical_call_id}"
    if outcome.status == "succeeded":
        return f"{outcome.call_id} succeeded result={json.dumps(outcome.result, sort_keys=True)}"
    if outcome.status in ("failed", "denied", "needs_review"):
        return f"{outcome.call_id} {outcome.status} reason_code={outcome.reason_code}"
    return f"{outcome.call_id} pending (no answer yet: are the services running?)"


async def main(args: argparse.Namespace) -> int:
    bootstrap = os.environ.get("INTENTLEDGER_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    message = assistant_turn(args.wallet, args.amount)
    async with Client(bootstrap, principal_id=args.principal, tenant_id=args.tenant,
                      signing_key=args.signing_key) as client:
        outcomes = await client.propose_openai_chat(
            args.run, message, operation_keys={"call_debit": args.operation_key},
            wait=args.timeout, settle=not args.answered)
    print(f"run {args.run}")
    for outcome in outcomes:
        print(describe(outcome))
    for tool_message in to_openai_tool_messages(outcomes):  # what the model reads next
        print(json.dumps(tool_message), file=sys.stderr)
    return 1 if any(o.ledger_status is None for o in outcomes) else 0


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=f"run-{uuid.uuid4().hex[:12]}",
                        help="the agent run; default: a new one")
    parser.add_argument("--operation-key", default=f"order-{uuid.uuid4().hex[:8]}:debit",
                        help="the debit's idempotency key (tenant-wide); default: a new one")
    parser.add_argument("--tenant", default="acme")
    parser.add_argument("--principal", default="user-42", help="on whose behalf the agent acts")
    parser.add_argument("--signing-key", metavar="FILE", help=(
        "the principal's private JWK; default: $INTENTLEDGER_SIGNING_KEY_FILE"))
    parser.add_argument("--wallet", default="w-1")
    parser.add_argument("--amount", default="12.50")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds to wait for the results; a call unsettled is 'pending'")
    parser.add_argument("--answered", action="store_true",
                        help="stop at the intake's answer (accepted, duplicate), not the result")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(arguments())))
