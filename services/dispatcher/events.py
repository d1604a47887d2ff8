"""Writing the dispatcher's events into the step's transaction (never published directly)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from services.dispatcher.leases import Lease
from services.dispatcher.repository import Attempt, Call
from shared.contracts.dispatch import CallEvent, CallState
from shared.contracts.effects import EFFECT_COMMITTED, CommittedEffect
from shared.db.unit_of_work import UnitOfWork
from shared.messaging.envelope import Envelope
from shared.topology import LEDGER_DISPATCH, LEDGER_EFFECTS

PRODUCER = "dispatcher"


class Recorder:
    """Writes the dispatcher's events to its two outbound topics (configurable, so that tests
    and deployments can move them)."""

    def __init__(self, dispatch_topic: str = LEDGER_DISPATCH,
                 effects_topic: str = LEDGER_EFFECTS) -> None:
        self.dispatch_topic = dispatch_topic
        self.effects_topic = effects_topic

    def call_event(self, uow: UnitOfWork, event_type: str, call: Call, lease: Lease, *,
                   state: CallState, version: int, attempt: Attempt | None = None,
                   **fields: Any) -> None:
        _call_event(uow, self.dispatch_topic, event_type, call, lease, state=state,
                    version=version, attempt=attempt, **fields)

    def committed_effect(self, uow: UnitOfWork, call: Call, attempt: Attempt,
                         result: dict[str, Any], receipt_id: str) -> None:
        _committed_effect(uow, self.effects_topic, call, attempt, result, receipt_id)


def _call_event(uow: UnitOfWork, topic: str, event_type: str, call: Call, lease: Lease, *,
                state: CallState, version: int, attempt: Attempt | None = None,
                **fields: Any) -> None:
    event = CallEvent(
        run_id=call.run_id, logical_call_id=call.logical_call_id, operation_key=call.operation_key,
        tool_name=call.tool_name, tool_version=call.tool_version, principal_id=call.principal_id,
        tenant_id=call.tenant_id, policy_version=call.policy_version, state=state, version=version,
        worker_id=lease.owner_id, fence=lease.fence,
        attempt=attempt.attempt if attempt else None,
        attempt_kind=attempt.kind if attempt else None,
        compensates=call.compensates, at=datetime.now(UTC), **fields)
    uow.emit(topic, Envelope.new(event_type=event_type, run_id=call.run_id, producer=PRODUCER,
                                 payload=event.model_dump(mode="json")))


def _committed_effect(uow: UnitOfWork, topic: str, call: Call, attempt: Attempt,
                      result: dict[str, Any], receipt_id: str) -> None:
    """⚑ ledger.effects: the audit trail of one business effect, for any subscriber.
    Worker and fence are those of the attempt that produced the effect."""
    effect = CommittedEffect(
        run_id=call.run_id, tenant_id=call.tenant_id, principal_id=call.principal_id,
        logical_call_id=call.logical_call_id, operation_key=call.operation_key,
        tool_name=call.tool_name, tool_version=call.tool_version,
        arguments_hash=call.arguments_hash, canonical_arguments=call.canonical_arguments,
        policy_version=call.policy_version, worker_id=attempt.worker_id, fence=attempt.fence,
        attempt=attempt.attempt, downstream_receipt_id=receipt_id, result=result,
        compensates=call.compensates, committed_at=datetime.now(UTC))
    uow.emit(topic, Envelope.new(event_type=EFFECT_COMMITTED, run_id=call.run_id,
                                 producer=PRODUCER, payload=effect.model_dump(mode="json")))
