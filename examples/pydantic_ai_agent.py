"""A Pydantic AI agent whose tools are intentledger's (``pip install
'intentledger-client[pydantic-ai]'``): the registry's tools as a ``FunctionToolset``, each call
a proposal keyed by the run and Pydantic AI's ``tool_call_id`` (docs/frameworks/pydantic-ai.md).

The model here is Pydantic AI's offline ``FunctionModel`` making one debit (no network, no API
key); put ``"openai:gpt-5"`` or any model in its place. Run it against the whole pipeline
(``docker compose up``) with a wallet that exists::

    intentledger tools export --format catalog > catalog.json
    python examples/pydantic_ai_agent.py --wallet tenant/acme/w-1 --catalog catalog.json \\
        --signing-key agent-7.jwk
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from pathlib import Path

from pydantic_ai import Agent, AgentRunResult
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from intentledger_client import Client
from intentledger_client.frameworks.pydantic_ai import ledger_toolset
from intentledger_client.tools import CATALOG, ToolDefinition


def one_debit(wallet_id: str, amount: str) -> FunctionModel:
    """Debit once; once the tool's result is back, say so."""
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(p.part_kind == "tool-return" for p in last.parts):
            return ModelResponse(parts=[TextPart(f"Done: {last.parts[0].model_response_str()}")])
        return ModelResponse(parts=[ToolCallPart("wallet_debit", {
            "wallet_id": wallet_id, "amount": amount, "currency": "EUR"}, tool_call_id="call_pay")])
    return FunctionModel(model)


async def pay(client: Client, catalog: list[ToolDefinition], run_id: str, model: Model,
              request: str = "Pay the order.") -> AgentRunResult[str]:
    """The agent (any model), its tools the registry's through the client, for one run."""
    shop = Agent(model, instructions="Pay what the user asks for.")
    return await shop.run(request, toolsets=[ledger_toolset(client, catalog, run_id=run_id)])


async def main(args: argparse.Namespace) -> int:
    bootstrap = os.environ.get("INTENTLEDGER_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    catalog = CATALOG.validate_json(Path(args.catalog).read_text())
    async with Client(bootstrap, principal_id=args.principal, tenant_id=args.tenant,
                      signing_key=args.signing_key) as client:
        result = await pay(client, catalog, args.run, one_debit(args.wallet, args.amount))
    print(result.output)
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
