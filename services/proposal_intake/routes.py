"""What the intake consumes: agents' proposals, every record one ``Proposal``."""

from __future__ import annotations

from services.proposal_intake.handlers import PROPOSAL, Intake
from shared.messaging.routes import Routes
from shared.topology import AGENT_PROPOSALS

ROUTES: Routes = {AGENT_PROPOSALS: {PROPOSAL: Intake.take}}
