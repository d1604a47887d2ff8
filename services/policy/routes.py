"""What the policy consumes, and which of its handlers applies each event."""

from __future__ import annotations

from services.policy.handlers import PolicyHandler
from shared.contracts.approvals import APPROVAL_GRANTED, APPROVAL_REFUSED
from shared.contracts.cancellations import RUN_CANCELLATION_REQUESTED
from shared.contracts.compensations import COMPENSATION_PROPOSED
from shared.contracts.intake import DUPLICATE_PROPOSAL, PROPOSAL_ACCEPTED, PROPOSAL_REJECTED
from shared.messaging.routes import IGNORED, Routes
from shared.contracts.resolutions import RESOLUTION_REQUESTED
from shared.contracts.withdrawals import CALL_WITHDRAWAL_REQUESTED
from shared.topology import LEDGER_APPROVALS, LEDGER_COMPENSATIONS, LEDGER_INTAKE, LEDGER_RESOLUTIONS

ROUTES: Routes = {
    LEDGER_INTAKE: {PROPOSAL_ACCEPTED: PolicyHandler.decide,
                    DUPLICATE_PROPOSAL: IGNORED,  # names an intent that exists: decided already
                    PROPOSAL_REJECTED: IGNORED},  # never became an intent
    LEDGER_APPROVALS: {APPROVAL_GRANTED: PolicyHandler.on_approval,
                       APPROVAL_REFUSED: PolicyHandler.on_approval,
                       CALL_WITHDRAWAL_REQUESTED: PolicyHandler.on_withdrawal},
    LEDGER_COMPENSATIONS: {COMPENSATION_PROPOSED: PolicyHandler.on_compensation},
    LEDGER_RESOLUTIONS: {RUN_CANCELLATION_REQUESTED: PolicyHandler.on_cancellation,
                         RESOLUTION_REQUESTED: IGNORED},  # a call's, and the dispatcher's to apply
}
