"""From a record on ``agent.proposals`` to intents and outcomes, in the consumer's transaction.

Every proposed call gets exactly one answer on ``agent.results``: accepted (a new intent, durable
before the answer), duplicate (same operation key, same canonical arguments: the intent that
exists), or rejected with a stable reason code. A record too broken to answer (not UTF-8, not
JSON, no readable run id) raises PermanentError, so the consumer template dead-letters it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from aiokafka import ConsumerRecord

from services.proposal_intake import repository
from shared.contracts.proposals import ToolCallProposal
from services.proposal_intake.domain import intent_of, name_intent
from services.proposal_intake.formats import ProposalRejection, to_proposals
from services.proposal_intake.limits import LimitViolation, check, reply_address
from services.proposal_intake.outcomes import Outcomes
from services.proposal_intake.settings import IntakeSettings
from shared.contracts.intake import IntakeReason
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError
from shared.tools import Rejection, ToolRegistry

_RECORD_NAMESPACE = uuid.UUID("5b0c3c4e-2a7f-4e4b-9a55-6f1f2f6f1a11")


@dataclass(frozen=True)
class RawProposal:
    """An agent's record, identified by its place in the log: a redelivered record is a
    duplicate for the inbox, while the same proposal sent again (a new record) is answered
    as a DuplicateProposal through its operation key."""

    event_id: uuid.UUID
    value: bytes


def decode_raw(record: ConsumerRecord) -> RawProposal:
    place = f"{record.topic}/{record.partition}/{record.offset}"
    return RawProposal(uuid.uuid5(_RECORD_NAMESPACE, place), record.value or b"")


class Intake:
    def __init__(self, registry: ToolRegistry, settings: IntakeSettings) -> None:
        self._registry = registry
        self._settings = settings

    async def __call__(self, uow: UnitOfWork, raw: RawProposal) -> None:
        outcomes = Outcomes(uow)
        try:
            document = check(raw.value, self._settings.limits)
        except LimitViolation as violation:
            _refuse_message(outcomes, violation.document, violation.code, violation.message, ())
            return
        try:
            proposals = to_proposals(document, self._settings.limits)
        except ProposalRejection as rejection:
            _refuse_message(outcomes, document, rejection.code, rejection.message, rejection.call_ids)
            return
        for proposal in proposals:
            await self._take(uow, outcomes, proposal)

    async def _take(self, uow: UnitOfWork, outcomes: Outcomes, proposal: ToolCallProposal) -> None:
        try:
            named = name_intent(proposal, self._registry)
        except Rejection as rejection:
            outcomes.rejected(proposal, rejection.code, rejection.message)
            return
        conn = uow.connection
        run = await repository.lock_run(conn, proposal.run_id, proposal.tenant_id,
                                        proposal.principal_id, self._run_limits(proposal))
        existing = await repository.call_by_operation_key(conn, named.operation_key)
        if existing is not None:
            if existing["arguments_hash"] == named.canonical.hash:
                outcomes.duplicate(proposal, named, existing)
            else:
                outcomes.rejected(proposal, IntakeReason.OPERATION_KEY_CONFLICT,
                                  "this operation key already names an intent with other arguments",
                                  named)
            return
        refusal = _run_refusal(run, proposal)
        if refusal is not None:
            outcomes.rejected(proposal, refusal[0], refusal[1], named)
            return
        intent = intent_of(proposal, named, run["deadline_at"])
        if not await repository.insert_intent(conn, intent):
            outcomes.rejected(proposal, IntakeReason.PROVIDER_CALL_ID_REUSED,
                              "this provider call id already names another intent in this run", named)
            return
        outcomes.accepted(proposal, intent)

    def _run_limits(self, proposal: ToolCallProposal) -> repository.RunLimits:
        budget = proposal.budget
        return repository.RunLimits(
            deadline_at=proposal.deadline_at
            or datetime.now(UTC) + timedelta(seconds=self._settings.default_run_seconds),
            max_calls=budget.max_calls if budget and budget.max_calls else self._settings.default_max_calls,
            max_attempts=(budget.max_attempts if budget and budget.max_attempts
                          else self._settings.default_max_attempts),
            cost_limit_minor=budget.cost_limit_minor if budget else None,
            currency=budget.currency if budget else None,
        )


def _refuse_message(outcomes: Outcomes, document, code: str, message: str,
                    call_ids: tuple[str, ...]) -> None:
    address = reply_address(document) if document is not None else None
    if address is None:
        raise PermanentError(f"unanswerable proposal ({code}): {message}")
    outcomes.rejected_message(address.run_id, call_ids or address.call_ids, code, message)


def _run_refusal(run, proposal: ToolCallProposal) -> tuple[IntakeReason, str] | None:
    if run["tenant_id"] != proposal.tenant_id:
        return IntakeReason.RUN_TENANT_MISMATCH, "this run belongs to another tenant"
    if run["deadline_at"] <= datetime.now(UTC):
        return IntakeReason.RUN_DEADLINE_PASSED, f"the run's deadline {run['deadline_at']} has passed"
    if run["call_count"] >= run["max_calls"]:
        return (IntakeReason.RUN_CALL_BUDGET_EXHAUSTED,
                f"the run already has its {run['max_calls']} logical calls")
    return None
