"""Issuing the capability an allow carries: narrow (one intent), expiring, signed.

It expires at the earliest of: the policy's capability lifetime, the intent's deadline and
every approval in its chain. Authority outlives nothing (docs/design.md §5.5); the dispatcher
checks all of it again at dispatch with ``shared.capabilities.refusal``.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from joserfc.jwk import OKPKey

from shared.policy.engine import Decision
from shared.capabilities import sign
from shared.contracts.authorizations import Capability
from shared.contracts.intake import Intent
from shared.identity.sealed import UNSIGNED
from shared.ids import new_event_id


def issue(decision_id: uuid.UUID, intent: Intent, decision: Decision, now: datetime,
          key: OKPKey) -> Capability:
    ends = [now + timedelta(seconds=decision.capability_ttl_seconds),
            *(approval.expires_at for approval in decision.approvals)]
    if intent.deadline_at is not None:
        ends.append(intent.deadline_at)
    draft = Capability(
        capability_id=new_event_id(), decision_id=decision_id, run_id=intent.run_id,
        logical_call_id=intent.logical_call_id, operation_key=intent.operation_key,
        principal_id=intent.principal_id, tenant_id=intent.tenant_id, tool_name=intent.tool_name,
        tool_version=intent.tool_version, arguments_hash=intent.arguments_hash,
        deadline_at=intent.deadline_at, run_max_attempts=intent.run_max_attempts,
        policy_version=decision.policy_version, approvals=decision.approvals,
        limits=decision.limits, issued_at=now, expires_at=min(ends), signature=UNSIGNED)
    # Signed over the model's own JSON form, the form the dispatcher re-derives when it checks.
    return sign(draft.model_dump(mode="json", exclude={"signature"}), key)
