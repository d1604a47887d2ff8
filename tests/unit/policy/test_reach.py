"""Could the policy ever allow a tool for a principal in a tenant: never under-approximated
(a tool some call could use is offered), and a tool an unconditional rule denies is not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.contracts.intake import Intent
from shared.policy.document import Policy
from shared.policy.engine import Request, evaluate
from shared.policy.reach import could_allow

APPROVAL = {"quorum": 1, "approvers": ["finance:*"]}
POLICY = Policy.model_validate({"rules": [
    {"name": "blocked", "principals": ["agent-7"], "tenants": ["acme"], "tools": ["wallet.debit"],
     "resource_path": "wallet_id", "resources": ["tenant/acme/blocked-*"], "effect": "deny"},
    {"name": "debits", "principals": ["agent-*"], "tenants": ["acme"], "tools": ["wallet.*"],
     "actions": ["debit"], "effect": "allow", "max_amount_minor": 100, "currency": "EUR",
     "over_cap": "require_approval", "approval": APPROVAL},
    {"name": "email", "principals": ["agent-7"], "tenants": ["acme"], "tools": ["email.send"],
     "effect": "require_approval", "approval": APPROVAL},
    {"name": "refunds-unapproved", "principals": ["agent-7"], "tenants": ["acme"],
     "tools": ["wallet.refund"], "effect": "allow"},
    {"name": "no-inventory-for-agent-9", "principals": ["agent-9"], "tenants": ["*"],
     "tools": ["inventory.*"], "effect": "deny"},
    {"name": "inventory", "principals": ["*"], "tenants": ["acme"], "tools": ["inventory.*"],
     "effect": "allow"}]})


@pytest.mark.parametrize(("principal", "tenant", "tool", "approval", "expected"), [
    ("agent-7", "acme", "wallet.debit", False, True),  # past a conditional deny
    ("agent-7", "globex", "wallet.debit", False, False),  # no rule for the tenant
    ("agent-7", "acme", "wallet.credit", False, False),  # the action does not match
    ("agent-7", "acme", "email.send", True, True),  # approval rule with approvers
    ("agent-7", "acme", "wallet.refund", False, True),
    ("agent-7", "acme", "wallet.refund", True, False),  # needs approval, the rule names nobody
    ("agent-9", "acme", "inventory.reserve", False, False),  # an unconditional deny first
    ("agent-8", "acme", "inventory.reserve", False, True),
])
def test_could_allow(principal, tenant, tool, approval, expected):
    assert could_allow(POLICY, principal, tenant, tool, tool_requires_approval=approval) is expected


def intent(principal: str, tenant: str, tool: str, arguments: dict) -> Intent:
    return Intent(run_id="r", provider="generic", provider_call_id="c",
                  logical_call_id="0190a000-0000-7000-8000-000000000000", operation_key="k",
                  tool_name=tool, tool_version="1", arguments_hash="h",
                  canonical_arguments=arguments, principal_id=principal, tenant_id=tenant,
                  deadline_at=datetime.now(UTC) + timedelta(minutes=5))


@pytest.mark.parametrize(("principal", "tenant", "tool", "arguments"), [
    ("agent-7", "acme", "wallet.debit", {"wallet_id": "tenant/acme/w-1"}),
    ("agent-7", "acme", "wallet.debit", {"wallet_id": "tenant/acme/blocked-1"}),
    ("agent-7", "globex", "wallet.debit", {"wallet_id": "tenant/globex/w-1"}),
    ("agent-9", "acme", "inventory.reserve", {}),
    ("agent-8", "acme", "inventory.reserve", {}),
    ("agent-7", "acme", "email.send", {}),
])
def test_a_tool_is_hidden_only_if_no_call_of_it_could_be_let_out(principal, tenant, tool,
                                                                 arguments):
    """Against the engine itself: a call it does not deny outright is of a tool offered."""
    decision = evaluate(POLICY, Request(intent(principal, tenant, tool, arguments), None,
                                        datetime.now(UTC)), None)
    if decision.effect != "deny":
        assert could_allow(POLICY, principal, tenant, tool)
