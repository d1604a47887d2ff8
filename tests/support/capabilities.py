"""Capabilities as the policy signs them, and effect requests carrying them, for tests that talk
to a downstream directly: the downstream refuses an effect request without one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from joserfc.jwk import OKPKey

from shared import capabilities
from shared.contracts.authorizations import Capability
from shared.contracts.effect_requests import EffectRequested
from tests.support import identities


def capability_for(operation_key: str, tool_name: str, canonical_arguments: dict[str, Any],
                   logical_call_id: uuid.UUID, *, tool_version: str = "1", tenant_id: str = "acme",
                   expires_in: timedelta = timedelta(minutes=5),
                   key: OKPKey | None = None) -> Capability:
    """Signed by the session's policy key unless ``key`` says otherwise."""
    now = datetime.now(UTC)
    return capabilities.sign({
        "capability_id": str(uuid.uuid4()), "decision_id": str(uuid.uuid4()),
        "run_id": f"run-{operation_key}", "logical_call_id": str(logical_call_id),
        "operation_key": operation_key, "principal_id": "agent-8", "tenant_id": tenant_id,
        "tool_name": tool_name, "tool_version": tool_version,
        "arguments_hash": capabilities.arguments_hash(canonical_arguments),
        "deadline_at": None, "run_max_attempts": None, "policy_version": "test",
        "issued_at": now.isoformat(), "expires_at": (now + expires_in).isoformat()},
        key or identities.capability_key())


def effect_request(key: str, arguments: dict, *, tool: str = "wallet.debit", fence: int = 1,
                   late: bool = False, signed: bool = True) -> EffectRequested:
    """A request of tenant ``acme`` as the dispatcher sends it, its capability signed by the
    session's policy key (``signed``), its deadline passed (``late``) or five minutes off."""
    call_id = uuid.uuid5(uuid.NAMESPACE_URL, key)
    return EffectRequested(
        operation_key=key, tool_name=tool, tool_version="1", canonical_arguments=arguments,
        attempt=1, fence=fence, tenant_id="acme", logical_call_id=call_id,
        deadline_at=datetime.now(UTC) + timedelta(minutes=-1 if late else 5),
        reply_topic="receipts",
        capability=capability_for(key, tool, arguments, call_id) if signed else None)
