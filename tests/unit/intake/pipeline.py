"""The first two intake steps as the consumer will run them, for tests to drive with bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shared.contracts.proposals import ReasonCode, ToolCallProposal
from services.proposal_intake.formats import ProposalRejection, to_proposals
from services.proposal_intake.limits import LimitViolation, check

EXAMPLES = Path(__file__).parent / "examples"


def example(name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES / f"{name}.json").read_text())


def intake(raw: bytes) -> tuple[ToolCallProposal, ...] | ReasonCode:
    """Proposals, or the reason code of the refusal; any other exception escapes."""
    try:
        return to_proposals(check(raw))
    except (LimitViolation, ProposalRejection) as refusal:
        return refusal.code


def encoded(document: Any) -> bytes:
    return json.dumps(document).encode()
