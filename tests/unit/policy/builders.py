"""Intents, policies and approvals for the policy's unit tests, one field changed at a time."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from shared.policy import Policy, Request
from shared.contracts.authorizations import GrantedApproval
from shared.contracts.intake import Intent
from shared.tools import canonicalize, load_registry

ROOT = Path(__file__).resolve().parents[3]
REGISTRY = load_registry(ROOT / "config" / "tools.example.yaml")
EXAMPLE_POLICY = ROOT / "config" / "policy.example.yaml"
NOW = datetime(2026, 3, 14, 10, 0, tzinfo=UTC)
DEBIT = {"wallet_id": "w-1", "amount": "40.00", "currency": "EUR"}


def intent(tool: str = "wallet.debit", arguments: dict[str, Any] | None = None, *,
           principal: str = "agent-7", tenant: str = "acme",
           deadline_at: datetime | None = NOW + timedelta(hours=1)) -> Intent:
    """A real intent: canonical arguments and hash as the intake computes them."""
    canonical = canonicalize(REGISTRY.get(tool, "1"), tenant, arguments or DEBIT)
    return Intent(
        run_id="run-1", provider="generic", provider_call_id="call-1",
        logical_call_id=uuid.uuid4(), operation_key=f"{tenant}:caller_stated:{uuid.uuid4().hex}",
        tool_name=tool, tool_version="1", arguments_hash=canonical.hash,
        canonical_arguments=canonical.value, principal_id=principal, tenant_id=tenant,
        deadline_at=deadline_at)


def debit(amount: str = "40.00", currency: str = "EUR", wallet: str = "w-1", **fields) -> Intent:
    return intent("wallet.debit", {"wallet_id": wallet, "amount": amount, "currency": currency},
                  **fields)


EMAIL = {"message_id": "msg-00000001", "to": ["a@example.com"], "subject": "Hi", "body": "Hello"}


def email(**fields) -> Intent:
    return intent("email.send", EMAIL, **fields)


def rule(name: str = "r", **fields: Any) -> dict[str, Any]:
    return {"name": name, "principals": ["agent-7"], "tenants": ["acme"], "tools": ["*"],
            "effect": "allow", **fields}


APPROVAL = {"quorum": 1, "approvers": ["operator:*"], "ttl_seconds": 900}


def policy(*rules: dict[str, Any], limits: tuple[dict[str, Any], ...] = (), **top: Any) -> Policy:
    return Policy.model_validate({"rules": list(rules or (rule(),)), "limits": list(limits), **top})


def request(the_intent: Intent, *approvals: GrantedApproval, now: datetime = NOW) -> Request:
    tool = REGISTRY.get(the_intent.tool_name, the_intent.tool_version)
    return Request.of(the_intent, tool, now, approvals)


def grant(approver: str = "operator:dana", *, expires_at: datetime = NOW + timedelta(minutes=15),
          decided_at: datetime = NOW - timedelta(minutes=1)) -> GrantedApproval:
    return GrantedApproval(approver_id=approver, decided_at=decided_at, expires_at=expires_at,
                           approval_event_id=uuid.uuid4())
