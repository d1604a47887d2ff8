"""A run's limits against one more call: pure, so the record-by-record path and the batch's
(``batch.py``) refuse the same calls for the same reasons."""

from __future__ import annotations

from datetime import UTC, datetime

from services.proposal_intake import repository
from services.proposal_intake.domain import proposed_by
from shared.contracts.intake import IntakeReason
from shared.contracts.proposals import ToolCallProposal


def run_refusal(run, limits: repository.RunLimits, proposal: ToolCallProposal,
                cost: tuple[int, str] | None, person_id: str | None
                ) -> tuple[IntakeReason, str] | None:
    """Checked against the run when it exists, else against the limits it would start with.
    The run is the proposal's tenant's own (``RunKey``): another tenant's run of the same id
    is not looked at, so its existence is neither confirmed nor touched. It is its principal's,
    and the person's a gateway proposed its first call for (``person_id`` is this proposal's),
    unless it was created before runs kept persons (migration 0008)."""
    if run is not None and not proposed_by(run, proposal.principal_id, person_id):
        return (IntakeReason.RUN_PRINCIPAL_MISMATCH,
                "this run belongs to another principal (or another person through the same agent)")
    deadline = run["deadline_at"] if run is not None else limits.deadline_at
    if deadline <= datetime.now(UTC):
        return IntakeReason.RUN_DEADLINE_PASSED, f"the run's deadline {deadline} has passed"
    if run is not None and run["call_count"] >= run["max_calls"]:
        return (IntakeReason.RUN_CALL_BUDGET_EXHAUSTED,
                f"the run already has its {run['max_calls']} intents")
    return _cost_refusal(run, limits, cost)


def _cost_refusal(run, limits: repository.RunLimits,
                  cost: tuple[int, str] | None) -> tuple[IntakeReason, str] | None:
    limit = run["cost_limit_minor"] if run is not None else limits.cost_limit_minor
    if limit is None or cost is None:
        return None
    currency = run["currency"] if run is not None else limits.currency
    spent = run["cost_spent_minor"] if run is not None else 0
    amount, call_currency = cost
    if call_currency != currency:
        return (IntakeReason.RUN_COST_CURRENCY_MISMATCH,
                f"the run's cost budget is in {currency}, this call costs {call_currency}")
    if spent + amount > limit:
        return (IntakeReason.RUN_COST_BUDGET_EXHAUSTED,
                f"{spent} + {amount} minor units would exceed the run's cost budget of {limit}")
    return None
