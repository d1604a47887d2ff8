"""What a proposed call came to, as an agent needs it: one ``Outcome`` per call, and a
``Handle`` to come back for it later, in this process or the next.

The ledger's answers are two (``contracts``): the intake's at once, and the projection's once
the call settles. An outcome folds them into the five things an agent loop branches on:

- ``succeeded``: the effect happened; ``result`` holds the tool's validated result fields;
- ``failed``: it did not happen, or was given back (FAILED, EXPIRED, COMPENSATED); see
  ``reason_code``;
- ``denied``: it was refused before anything happened, by the intake (``ProposalRejected``) or by
  the policy (DENIED); see ``reason_code`` (``retry_after_s`` for a rate limit);
- ``awaiting_approval``: it waits for people before it may take effect (nothing has happened);
  ``approval`` says how many approvals and by when, for the agent to tell its user; the settled
  state follows: wait on ``handle`` again;
- ``needs_review``: a person must settle it (MANUAL_REVIEW, COMPENSATION_FAILED); a later
  settled state may follow: wait on ``handle`` again;
- ``pending``: no settled answer yet. Never a guess: wait on ``handle`` (a timeout, a restart
  and a lost answer all end here); proposing the call again under the same operation key is
  safe, it is answered as a duplicate of the same intent and cannot take effect twice.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from intentledger_client.contracts import (Announcement, ProposalOutcome,
                                           ToolCallAwaitingApproval, ToolCallSettled)

Status = Literal["succeeded", "failed", "denied", "awaiting_approval", "needs_review", "pending"]
_STATUS_OF: dict[str, Status] = {
    "SUCCEEDED": "succeeded", "FAILED": "failed", "EXPIRED": "failed", "COMPENSATED": "failed",
    "DENIED": "denied", "MANUAL_REVIEW": "needs_review", "COMPENSATION_FAILED": "needs_review"}


class Handle(BaseModel):
    """Everything needed to find a call's answers again, serializable (``model_dump_json`` /
    ``Handle.model_validate_json``): its tenant's topic, the partition its run's answers are on
    and the offset from which they are (None while the topic did not exist: from its start)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: str
    run_id: str
    call_id: str
    proposal_id: uuid.UUID | None
    """The id of the record sent (None: the send was not acknowledged, so no answer can be
    told apart as its own: propose it again under the same operation key)."""
    logical_call_id: uuid.UUID | None = None
    operation_key: str | None = None
    intent_run_id: str | None = None
    """A duplicate's: the run its intent belongs to, whose partition carries its states."""
    partition: int | None = None
    offset: int = 0
    """Where its answers may be, on: the end of the partition when it was proposed; its start
    for a duplicate, whose original may have settled long before."""
    settled_after: int = -1
    """The offset of the state already reported (settled, or awaiting approval): waiting again
    waits for a later one."""


class NotTheProposer(ValueError):
    """``Client.wait(handle, proposer=..., person=...)``: the intake's answer to the handle's
    record names another principal as the call's proposer, or another person it was proposed
    for."""


class Outcome(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Status
    handle: Handle
    answer: ProposalOutcome | None = None
    """The intake's answer, if it has arrived."""
    settled: ToolCallSettled | None = None
    """The latest settled state announced, if any has arrived."""
    approval: ToolCallAwaitingApproval | None = None
    """While it awaits approval (and has not settled since): how many approvals, by when."""

    @property
    def call_id(self) -> str:
        return self.handle.call_id

    @property
    def reason_code(self) -> str | None:
        if self.settled is not None:
            return self.settled.reason_code
        return self.answer.reason_code if self.answer is not None else None

    @property
    def result(self) -> dict[str, Any] | None:
        """The tool's validated result fields (schema-checked by the dispatcher), nothing else."""
        return self.settled.result if self.settled is not None else None

    @property
    def ledger_status(self) -> str | None:
        """The ledger's own word: the settled status, else the intake's outcome."""
        if self.settled is not None:
            return self.settled.status
        if self.approval is not None:
            return "AWAITING_APPROVAL"
        return self.answer.outcome if self.answer is not None else None


def outcome_of(handle: Handle, answer: ProposalOutcome | None,
               latest: Announcement | None) -> Outcome:
    """From the intake's answer and the latest state announced since (settled, or awaiting
    approval)."""
    status: Status
    if isinstance(latest, ToolCallAwaitingApproval):
        return Outcome(status="awaiting_approval", handle=handle, answer=answer, approval=latest)
    if latest is not None:
        status = _STATUS_OF[latest.status]
    elif answer is not None and answer.outcome == "rejected":
        status = "denied"
    else:
        status = "pending"
    return Outcome(status=status, handle=handle, answer=answer, settled=latest)
