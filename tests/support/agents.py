"""An agent's side of a pipeline stage (``pipeline_stack``), for the tests of agents, the MCP
gateway and the framework adapters: a policy for a payer and a stocker, the agent client of a
principal on the stage's topics, and the deployment's tool catalogue as a client reads it."""

from __future__ import annotations

from intentledger_client import Client
from intentledger_client.tools import ToolDefinition

from shared.tools.catalog import catalog
from shared.tools.loader import load_registry
from tests.support.dispatch import Stage
from tests.support.identities import local

CAP = 5_000  # 50.00 EUR: above it a debit waits for finance's approval


def policy(payer: str, stocker: str) -> dict:
    """``payer`` debits acme's wallets (not the blocked ones; above the cap with finance's
    approval); ``stocker`` reserves inventory and nothing else."""
    return {"capability_ttl_seconds": 120, "rules": [
        {"name": "blocked-wallets", "principals": [payer], "tenants": ["acme"],
         "tools": ["wallet.debit"], "resource_path": "wallet_id",
         "resources": ["tenant/acme/blocked-*"], "effect": "deny"},
        {"name": "debits", "principals": [payer], "tenants": ["acme"], "tools": ["wallet.debit"],
         "resource_path": "wallet_id", "resources": ["tenant/acme/*"], "effect": "allow",
         "max_amount_minor": CAP, "currency": "EUR", "over_cap": "require_approval",
         "approval": {"quorum": 1, "approvers": ["finance:*"], "ttl_seconds": 600}},
        {"name": "holds", "principals": [stocker], "tenants": ["acme"],
         "tools": ["inventory.*"], "effect": "allow"}]}


def agent(stage: Stage, principal: str) -> Client:
    """The principal's client on the stage's topics, signing with its local key."""
    return Client(stage.endpoints.kafka_bootstrap, principal_id=principal, tenant_id="acme",
                  signing_key=local().signing_key(principal), results_family=stage.results,
                  proposals_topic=stage.proposals, approvals_topic=stage.approvals)


def tool_catalog(stage: Stage) -> list[ToolDefinition]:
    """What ``intentledger tools export --format catalog`` gives for the stage's registry."""
    return catalog(load_registry(stage.tools_file))
