"""What one ledger event says, in the projection's terms: the audit columns of its history row,
and what it contributes to a call's row or to its run. Pure: no I/O and no clock, so the live
consumer and a replay read every event the same way.

Each event that moves a call carries a rank ``(stage, version, event_id)``: the intake's
acceptance (stage 1), the policy's decision (stage 2: an approval request before the decision
that concludes it), then the dispatcher's own version (stage 3). Events of one call come from
three topics that Kafka does not order against each other; the rank orders them anyway.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from shared.contracts.authorizations import (AUTHORIZATION_ALLOWED, AUTHORIZATION_DENIED,
                                             ApprovalRequest, Authorization, AuthorizationRefusal)
from shared.contracts.dispatch import RUN_ABORTED, CallEvent, CallState
from shared.contracts.effects import CommittedEffect
from shared.contracts.intake import DUPLICATE_PROPOSAL, ProposalOutcome, Intent
from shared.errors import PermanentError
from shared.messaging.envelope import Envelope, parse
from shared.runs import RunKey

INTAKE, POLICY, DISPATCHER = 1, 2, 3
"""Stages of a call's composite version."""
VALIDATED, AWAITING_APPROVAL = "VALIDATED", "AWAITING_APPROVAL"
"""The projection's states beyond the dispatcher's (a refused proposal is no call at all)."""


@dataclass(frozen=True)
class Delivery:
    """One ledger event as consumed: its envelope and the topic it came from."""

    topic: str
    envelope: Envelope

    @property
    def event_id(self) -> uuid.UUID:
        """The inbox's dedup key (the envelope's UUIDv7)."""
        return self.envelope.event_id

    @property
    def run_id(self) -> str:
        return self.envelope.run_id

    @property
    def payload(self) -> dict[str, Any]:
        return self.envelope.payload

    @property
    def event_type(self) -> str:
        return self.envelope.event_type

    @property
    def traceparent(self) -> str | None:
        """The consumer continues the event's trace while applying it."""
        return self.envelope.traceparent


@dataclass(frozen=True)
class Audit:
    """The history's answer to docs/design.md §5.11: who, under which policy, which worker and
    fence, which attempt, which downstream receipt."""

    tenant_id: str | None = None
    principal_id: str | None = None
    logical_call_id: uuid.UUID | None = None
    policy_version: str | None = None
    worker_id: str | None = None
    fence: int | None = None
    attempt: int | None = None
    receipt_id: str | None = None


@dataclass(frozen=True)
class CallFact:
    """What an event says about one call: a state at a rank, plus facts that never change
    (identity) or only grow (attempts, the last time it was marked UNKNOWN)."""

    logical_call_id: uuid.UUID
    run_id: str
    tenant_id: str
    principal_id: str
    stage: int
    version: int
    event_id: uuid.UUID
    state: str
    occurred_at: datetime
    provider_call_id: str | None = None
    operation_key: str | None = None
    tool_name: str | None = None
    tool_version: str | None = None
    arguments_hash: str | None = None
    compensates: uuid.UUID | None = None
    reason: str | None = None
    policy_version: str | None = None
    worker_id: str | None = None
    fence: int | None = None
    attempt: int | None = None
    receipt_id: str | None = None
    result: dict[str, Any] | None = None

    @property
    def rank(self) -> tuple[int, int, uuid.UUID]:
        return self.stage, self.version, self.event_id


@dataclass(frozen=True)
class RunFact:
    """A run-level event: the dispatcher aborted the run, or the intake refused a proposal."""

    tenant_id: str
    run_id: str
    kind: Literal["aborted", "rejected"]
    reason: str | None
    event_id: uuid.UUID
    occurred_at: datetime


@dataclass(frozen=True)
class Fact:
    delivery: Delivery
    audit: Audit
    call: CallFact | None = None
    run: RunFact | None = None

    def __post_init__(self) -> None:
        if not self.audit.tenant_id:
            # A run is named by its tenant and id (shared/runs.py): an event without a tenant
            # would belong to no run, or, guessed from its run id, to someone else's.
            raise PermanentError(f"{self.envelope.event_type} {self.envelope.event_id} names no "
                                 "tenant: every ledger event belongs to one tenant's run")

    @property
    def envelope(self) -> Envelope:
        return self.delivery.envelope

    @property
    def run_key(self) -> RunKey:
        return RunKey(self.audit.tenant_id, self.envelope.run_id)

    @property
    def trace_id(self) -> str | None:
        """The W3C trace id (``00-<trace id>-<span id>-<flags>``), to join the traces."""
        parts = (self.envelope.traceparent or "").split("-")
        return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def accepted(delivery: Delivery) -> Fact:
    intent = parse(delivery.envelope, Intent)
    return Fact(delivery, _of_intent(intent), call=_intent_fact(intent, delivery.envelope, INTAKE,
                                                                1, VALIDATED))


def outcome(delivery: Delivery) -> Fact:
    """A duplicate names an existing call under a new provider call id, so it changes no call;
    a refused proposal never became a call, so it counts on its run only."""
    envelope = delivery.envelope
    answer = parse(envelope, ProposalOutcome)
    audit = Audit(answer.tenant_id, answer.principal_id, answer.logical_call_id)
    if envelope.event_type == DUPLICATE_PROPOSAL:
        return Fact(delivery, audit)
    return Fact(delivery, audit, run=RunFact(answer.tenant_id, envelope.run_id, "rejected",
                                             answer.reason_code, envelope.event_id,
                                             envelope.occurred_at))


def committed(delivery: Delivery) -> Fact:
    effect = parse(delivery.envelope, CommittedEffect)
    return Fact(delivery, Audit(effect.tenant_id, effect.principal_id, effect.logical_call_id,
                                effect.policy_version, effect.worker_id, effect.fence,
                                effect.attempt, effect.downstream_receipt_id))


def decision(delivery: Delivery) -> Fact:
    envelope = delivery.envelope
    if envelope.event_type == AUTHORIZATION_ALLOWED:
        decision = parse(envelope, Authorization)
        version, state, reason = 2, CallState.AUTHORIZED.value, None
    elif envelope.event_type == AUTHORIZATION_DENIED:
        decision = parse(envelope, AuthorizationRefusal)
        version, state, reason = 2, CallState.DENIED.value, decision.reason_code
    else:
        decision = parse(envelope, ApprovalRequest)
        version, state, reason = 1, AWAITING_APPROVAL, None  # concluded by an allow or a denial
    intent = decision.intent
    audit = Audit(intent.tenant_id, intent.principal_id, intent.logical_call_id,
                  decision.policy_version)
    return Fact(delivery, audit, call=_intent_fact(intent, envelope, POLICY, version, state,
                                                   reason=reason,
                                                   policy_version=decision.policy_version))


def dispatched(delivery: Delivery) -> Fact:
    envelope = delivery.envelope
    event = parse(envelope, CallEvent)
    audit = Audit(event.tenant_id, event.principal_id, event.logical_call_id, event.policy_version,
                  event.worker_id, event.fence, event.attempt, event.receipt_id)
    if envelope.event_type == RUN_ABORTED:
        # It repeats the call's current state and version: a fact about the run, not a step.
        return Fact(delivery, audit, run=RunFact(event.tenant_id, envelope.run_id, "aborted",
                                                 event.reason, envelope.event_id,
                                                 envelope.occurred_at))
    call = CallFact(
        logical_call_id=event.logical_call_id, run_id=envelope.run_id, tenant_id=event.tenant_id,
        principal_id=event.principal_id, stage=DISPATCHER, version=event.version,
        event_id=envelope.event_id, state=event.state.value, occurred_at=envelope.occurred_at,
        operation_key=event.operation_key, tool_name=event.tool_name,
        tool_version=event.tool_version, compensates=event.compensates, reason=event.reason,
        policy_version=event.policy_version, worker_id=event.worker_id, fence=event.fence,
        attempt=event.attempt, receipt_id=event.receipt_id, result=event.result)
    return Fact(delivery, audit, call=call)


def _intent_fact(intent: Intent, envelope: Envelope, stage: int, version: int, state: str,
                 **fields: Any) -> CallFact:
    return CallFact(
        logical_call_id=intent.logical_call_id, run_id=envelope.run_id,
        tenant_id=intent.tenant_id, principal_id=intent.principal_id, stage=stage,
        version=version, event_id=envelope.event_id, state=state,
        occurred_at=envelope.occurred_at,
        # a compensation has no agent's call: no provider call id
        provider_call_id=intent.provider_call_id if intent.compensates is None else None,
        operation_key=intent.operation_key, tool_name=intent.tool_name,
        tool_version=intent.tool_version, arguments_hash=intent.arguments_hash,
        compensates=intent.compensates, **fields)


def _of_intent(intent: Intent) -> Audit:
    return Audit(intent.tenant_id, intent.principal_id, intent.logical_call_id)
