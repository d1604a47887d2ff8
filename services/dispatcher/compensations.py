"""Compensation is a new effect, not a rollback (docs/design.md §5.8).

The compensation gets an intent of its own (``shared.tools.compensation`` derives it: its own
operation key, a deterministic call id, its own deadline) and then the life of any call,
beginning with authority: the dispatcher proposes it to the policy, sealed with the
dispatcher's key (``CompensationProposal``), and sends nothing until the policy's capability
for it arrives; attempts, reconciliation and audit follow as for any call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from services.dispatcher.repository import Call
from shared.contracts.compensations import TYP, CompensationProposal
from shared.contracts.dispatch import DispatchReason
from shared.contracts.intake import Intent
from shared.identity.sealed import UNSIGNED, Key, sealed_copy
from shared.tools import ToolSpec
from shared.tools.compensation import ArgumentsMissing, compensation_intent


class NoCompensation(Exception):
    def __init__(self, reason: DispatchReason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def intent_for(original: Call, compensating: ToolSpec, sources: dict[str, str],
               deadline_at: datetime) -> Intent:
    try:
        return compensation_intent(Intent.model_validate(original.intent), original.result,
                                   compensating, sources, deadline_at)
    except ArgumentsMissing as missing:
        raise NoCompensation(DispatchReason.COMPENSATION_ARGUMENTS_MISSING, str(missing)) from None


@dataclass(frozen=True)
class Proposer:
    """The dispatcher's principal in the principals file (role ``compensator``) and its key."""

    principal_id: str
    key: Key

    def propose(self, intent: Intent, original_operation_key: str) -> CompensationProposal:
        unsigned = CompensationProposal(intent=intent, original_operation_key=original_operation_key,
                                        requested_by=self.principal_id,
                                        expires_at=intent.deadline_at, signature=UNSIGNED)
        return sealed_copy(unsigned, self.key, TYP)
