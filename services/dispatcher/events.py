"""Writing the dispatcher's events into the step's transaction (never published directly).

A move into a state the agent is told about (``states.SETTLED``) is also announced to the
agent that proposed the call, on its tenant's ``agent.results.<tenant>``, in the same
transaction: the agent learns the outcome one hop after the dispatcher records it, instead of
waiting for the projection to read it back (docs/design.md §2). What the policy decides, the
policy announces.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from services.dispatcher.leases import Lease
from services.dispatcher.repository import Attempt, Call
from services.dispatcher.states import SETTLED
from shared.contracts.dispatch import RUN_ABORTED, CallEvent, CallState
from shared.contracts.effects import EFFECT_COMMITTED, CommittedEffect
from shared.contracts.results import TOOL_CALL_SETTLED, ToolCallSettled
from shared.db.unit_of_work import UnitOfWork
from shared.messaging.envelope import Envelope
from shared.topology import AGENT_RESULTS, LEDGER_DISPATCH, LEDGER_EFFECTS, results_topic

PRODUCER = "dispatcher"


class Recorder:
    """Writes the dispatcher's events to its outbound topics (configurable, so that tests and
    deployments can move them)."""

    def __init__(self, dispatch_topic: str = LEDGER_DISPATCH,
                 effects_topic: str = LEDGER_EFFECTS,
                 results_family: str = AGENT_RESULTS) -> None:
        self.dispatch_topic = dispatch_topic
        self.effects_topic = effects_topic
        self.results_family = results_family

    def call_event(self, uow: UnitOfWork, event_type: str, call: Call, lease: Lease, *,
                   state: CallState, version: int, attempt: Attempt | None = None,
                   **fields: Any) -> None:
        """``call`` moved to ``state`` (at ``version``): its event, and its announcement when
        the agent is told about that state. A saga's compensation is no agent's call."""
        event, envelope = _call_event(uow, self.dispatch_topic, event_type, call, lease,
                                      state=state, version=version, attempt=attempt, **fields)
        if state in SETTLED and call.compensates is None:
            _settled(uow, results_topic(call.tenant_id, self.results_family), call, event,
                     envelope)

    def run_aborted(self, uow: UnitOfWork, call: Call, lease: Lease, *, reason: str,
                    detail: str | None) -> None:
        """The run stopped while ``call`` stays where it is: nothing to announce."""
        _call_event(uow, self.dispatch_topic, RUN_ABORTED, call, lease, state=call.state,
                    version=call.version, reason=reason, detail=detail)

    def committed_effect(self, uow: UnitOfWork, call: Call, attempt: Attempt,
                         result: dict[str, Any], receipt_id: str) -> None:
        _committed_effect(uow, self.effects_topic, call, attempt, result, receipt_id)


def _call_event(uow: UnitOfWork, topic: str, event_type: str, call: Call, lease: Lease, *,
                state: CallState, version: int, attempt: Attempt | None = None,
                **fields: Any) -> tuple[CallEvent, Envelope]:
    event = CallEvent(
        run_id=call.run_id, logical_call_id=call.logical_call_id, operation_key=call.operation_key,
        tool_name=call.tool_name, tool_version=call.tool_version, principal_id=call.principal_id,
        tenant_id=call.tenant_id, policy_version=call.policy_version, state=state, version=version,
        worker_id=lease.owner_id, fence=lease.fence,
        attempt=attempt.attempt if attempt else None,
        attempt_kind=attempt.kind if attempt else None,
        compensates=call.compensates, at=datetime.now(UTC), **fields)
    envelope = Envelope.new(event_type=event_type, run_id=call.run_id, producer=PRODUCER,
                            payload=event.model_dump(mode="json"))
    uow.emit(topic, envelope)
    return event, envelope


def _settled(uow: UnitOfWork, topic: str, call: Call, event: CallEvent,
             cause: Envelope) -> None:
    """⚑ What the agent reads: the call's settled state with only the validated result the
    dispatcher recorded (a later state, COMPENSATED, keeps the result of the effect it undid).
    ``cause`` is ``event``'s envelope, so the announcement continues its trace."""
    payload = ToolCallSettled(
        run_id=call.run_id, call_id=call.intent["provider_call_id"],
        logical_call_id=call.logical_call_id, operation_key=call.operation_key,
        tool_name=call.tool_name, tool_version=call.tool_version, status=event.state,
        reason_code=event.reason, receipt_id=event.receipt_id or call.receipt_id,
        result=event.result if event.result is not None else call.result, settled_at=event.at)
    uow.emit(topic, Envelope.new(event_type=TOOL_CALL_SETTLED, run_id=call.run_id,
                                 producer=PRODUCER, payload=payload.model_dump(mode="json"),
                                 causation=cause))


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
