"""An OpenAI Agents SDK agent whose tools are intentledger's (``pip install
'intentledger-client[openai-agents]'``): the registry's tools as ``FunctionTool``s, each call
a proposal keyed by the run and the SDK's ``call_id`` (docs/frameworks/openai-agents.md).

The model here is the SDK's offline ``agents.testing.ScriptedModel`` replaying one debit (no
network, no API key); drop ``model=`` to use OpenAI's. Run it against the whole pipeline
(``docker compose up``) with a wallet that exists::

    intentledger tools export --format catalog > catalog.json
    python examples/openai_agents_agent.py --wallet tenant/acme/w-1 --catalog catalog.json \\
        --signing-key agent-7.jwk

Run it again with the same ``--run``: the SDK calls the tool under the same ``call_id``, and
the ledger answers with the first debit's result; nothing is paid twice.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from pathlib import Path

from agents import Agent, Model, RunConfig, Runner, RunResult
from agents.testing import ScriptedModel, assistant_message, function_call

from intentledger_client import Client
from intentledger_client.frameworks.openai_agents import function_tools
from intentledger_client.tools import CATALOG, ToolDefinition


async def pay(client: Client, catalog: list[ToolDefinition], run_id: str, model: Model,
              request: str = "Pay the order.") -> RunResult:
    """The agent: the registry's tools, calling through the client; one run of it."""
    shop = Agent(name="shop", instructions="Pay what the user asks for.", model=model,
                 tools=function_tools(client, catalog, run_id=run_id))
    return await Runner.run(shop, request, run_config=RunConfig(tracing_disabled=True))


def one_debit(wallet_id: str, amount: str) -> ScriptedModel:
    return ScriptedModel([
        [function_call("wallet_debit", {"wallet_id": wallet_id, "amount": amount,
                                        "currency": "EUR"}, call_id="call_pay")],
        [assistant_message("Paid.")]])


async def main(args: argparse.Namespace) -> int:
    bootstrap = os.environ.get("INTENTLEDGER_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    catalog = CATALOG.validate_json(Path(args.catalog).read_text())
    async with Client(bootstrap, principal_id=args.principal, tenant_id=args.tenant,
                      signing_key=args.signing_key) as client:
        result = await pay(client, catalog, args.run, one_debit(args.wallet, args.amount))
    for item in result.new_items:
        print(f"{item.type}: {getattr(item, 'output', '')}")
    print(result.final_output)
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
    parser.add_argument("--amount", default="40.00")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(arguments())))
