"""Writing outcomes: one event on the tenant's ``agent.results.<tenant>`` for the agent and one
on ``ledger.intake`` for the rest of the ledger (the topics the deployment configures), both
through the outbox of the consumer's transaction."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from shared.contracts.proposals import ToolCallProposal
from services.proposal_intake.domain import Named, proposed_by
from shared.contracts.intake import (DUPLICATE_PROPOSAL, PROPOSAL_ACCEPTED, PROPOSAL_REJECTED,
                                     IntakeReason, ProposalOutcome, Intent)
from shared.errors import is_retryable
from shared.messaging.envelope import Envelope
from shared.topology import AGENT_RESULTS, LEDGER_INTAKE, results_topic

log = logging.getLogger(__name__)
PRODUCER = "proposal-intake"


class Sink(Protocol):
    """Where outcomes go: the unit of work's outbox, or a batch's answers held for it."""

    def emit(self, topic: str, envelope: Envelope) -> None: ...


class Outcomes:
    def __init__(self, sink: Sink, proposal_id: uuid.UUID, *, person_id: str | None = None,
                 results_family: str = AGENT_RESULTS, intake_topic: str = LEDGER_INTAKE,
                 traceparent: str | None = None) -> None:
        """``person_id``: the person the record's verified signature says its calls are for (a
        gateway's ``person`` claim), told with every answer about them. ``traceparent``: the
        trace the events continue (else the current span's)."""
        self._sink = sink
        self._person_id = person_id
        self._traceparent = traceparent
        self._proposal_id = proposal_id
        self._results_family = results_family
        self._intake_topic = intake_topic

    def accepted(self, proposal: ToolCallProposal, intent: Intent) -> None:
        outcome = self._about(proposal, "accepted", logical_call_id=intent.logical_call_id,
                         operation_key=intent.operation_key, tool_name=intent.tool_name,
                         tool_version=intent.tool_version, arguments_hash=intent.arguments_hash)
        self._emit(PROPOSAL_ACCEPTED, proposal.tenant_id, proposal.run_id,
                   outcome.model_dump(mode="json"),
                   intent.model_dump(mode="json"))

    def duplicate(self, proposal: ToolCallProposal, named: Named, existing) -> None:
        outcome = self._about(proposal, "duplicate", logical_call_id=existing["logical_call_id"],
                              state=existing["state"], intent_run_id=existing["run_id"],
                              **_named(named))
        payload = outcome.model_dump(mode="json")
        self._emit(DUPLICATE_PROPOSAL, proposal.tenant_id, proposal.run_id, payload, payload)

    def taken(self, proposal: ToolCallProposal, named: Named, existing) -> None:
        """Same key + same canonical arguments → the existing intent; other arguments → refused;
        an expired key → refused, naming the intent it was (its outcome stays readable by id).

        All of that only to whoever proposed the intent: its principal, and the person a
        gateway proposed it for. Keys are tenant-wide, and a key is often derivable from the
        arguments alone (``per_entity``), so another principal of the tenant, or another person
        behind the same agent, is refused ``operation_key_in_use`` whatever its arguments,
        naming nothing: a duplicate would hand it the intent's id, and its client would follow
        the intent to its settled result, which the policy never judged it may see. A tombstone
        written before tombstones kept their proposer names its intent to no one; an intent
        recorded before persons were (migration 0007) is answered by its principal alone."""
        if (expired_at := existing.get("expired_at")) is not None and existing.get(
                "principal_id") is None:
            self.rejected(proposal, IntakeReason.OPERATION_KEY_EXPIRED,
                          f"this operation key named an intent whose record expired at "
                          f"{expired_at.isoformat()}; it is never executed again", named)
        elif not proposed_by(existing, proposal.principal_id, self._person_id):
            self.rejected(proposal, IntakeReason.OPERATION_KEY_IN_USE,
                          "this operation key names an intent another principal (or another "
                          "person through the same agent) proposed; it takes effect once, and "
                          "only its proposer is told its outcome", named)
        elif expired_at is not None:
            self.rejected(proposal, IntakeReason.OPERATION_KEY_EXPIRED,
                          f"this operation key named intent {existing['logical_call_id']}, whose "
                          f"record expired at {expired_at.isoformat()}; it is never executed "
                          "again", named, logical_call_id=existing["logical_call_id"],
                          intent_run_id=existing["run_id"])
        elif existing["arguments_hash"] == named.canonical.hash:
            self.duplicate(proposal, named, existing)
        else:
            self.rejected(proposal, IntakeReason.OPERATION_KEY_CONFLICT,
                          "this operation key already names an intent with other arguments", named)

    @contextmanager
    def refusing_failures(self, proposal: ToolCallProposal, named: Named) -> Iterator[None]:
        """Every call gets one answer: a bug or bad data in one call is refused as
        ``internal_error`` instead of silencing the whole message (retryable errors pass)."""
        try:
            yield
        except Exception as error:
            if is_retryable(error):
                raise
            log.exception("intake: call %s of run %s could not be recorded",
                          proposal.provider_call_id, proposal.run_id)
            self.rejected(proposal, IntakeReason.INTERNAL_ERROR,
                          f"the intake could not record this call ({type(error).__name__})", named)

    def rejected(self, proposal: ToolCallProposal, code: str, message: str,
                 named: Named | None = None, **about) -> None:
        named_fields = _named(named) if named else {"tool_name": proposal.tool_name,
                                                     "tool_version": proposal.tool_version}
        outcome = self._about(proposal, "rejected", reason_code=str(code), message=message,
                              **named_fields, **about)
        payload = outcome.model_dump(mode="json")
        self._emit(PROPOSAL_REJECTED, proposal.tenant_id, proposal.run_id, payload, payload)

    def rejected_message(self, tenant_id: str, run_id: str, call_ids: tuple[str, ...] | list[str],
                         code: str, message: str, *, recorded_under: str | None) -> None:
        """A whole message refused before its calls could be read: one answer per call id, on
        ``tenant_id``'s results topic (which tenant that is: ``handlers.py``). The ledger is
        told only under ``recorded_under``, the tenant the sender proved to be, and the event
        carries it: the refusal counts in that tenant's run of this id and no one else's. With
        None, the agent learns why (by the record's ``proposal_id``) but nothing enters the
        history: whoever the sender is, it puts no event into anyone's run."""
        for call_id in list(call_ids) or [None]:
            answer = ProposalOutcome(outcome="rejected", run_id=run_id, call_id=call_id,
                                     proposal_id=self._proposal_id, reason_code=str(code),
                                     message=message)
            recorded = (None if recorded_under is None else
                        answer.model_copy(update={"tenant_id": recorded_under}).model_dump(mode="json"))
            self._emit(PROPOSAL_REJECTED, tenant_id, run_id, answer.model_dump(mode="json"),
                       recorded)

    def throttled(self, proposals: tuple[ToolCallProposal, ...], message: str,
                  retry_after_s: float | None) -> None:
        """Refused ``proposal_rate_exceeded``: answered to the agent only. The ledger's history
        gets nothing, so a flood costs one outbox row per call and no run, intent or event."""
        for proposal in proposals:
            payload = self._about(proposal, "rejected",
                                  reason_code=IntakeReason.PROPOSAL_RATE_EXCEEDED, message=message,
                                  retry_after_s=retry_after_s,
                                  tool_name=proposal.tool_name,
                                  tool_version=proposal.tool_version).model_dump(mode="json")
            self._emit(PROPOSAL_REJECTED, proposal.tenant_id, proposal.run_id, payload, None)

    def _about(self, proposal: ToolCallProposal, outcome: str, **fields) -> ProposalOutcome:
        return ProposalOutcome(outcome=outcome, run_id=proposal.run_id,
                               call_id=proposal.provider_call_id, proposal_id=self._proposal_id,
                               provider=proposal.provider, tenant_id=proposal.tenant_id,
                               principal_id=proposal.principal_id, person_id=self._person_id,
                               **fields)

    def _emit(self, event_type: str, tenant_id: str, run_id: str, for_agent: dict,
              for_ledger: dict | None) -> None:
        self._sink.emit(results_topic(tenant_id, self._results_family), Envelope.new(
            event_type=event_type, run_id=run_id, producer=PRODUCER, payload=for_agent,
            traceparent=self._traceparent))
        if for_ledger is not None:
            self._sink.emit(self._intake_topic, Envelope.new(
                event_type=event_type, run_id=run_id, producer=PRODUCER, payload=for_ledger,
                traceparent=self._traceparent))


def _named(named: Named) -> dict:
    return {"operation_key": named.operation_key, "tool_name": named.tool.name,
            "tool_version": named.tool.version, "arguments_hash": named.canonical.hash}
