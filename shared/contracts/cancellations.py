"""⚑ ``ledger.resolutions`` (inbound): an operator cancels a run.

Published by ``intentledger runs cancel`` or any Kafka client, signed by the operator
(``intentledger-cancellation+jws``); read by the dispatcher, which owns the run's calls. It is
applied only if the signature proves an operator of the run's tenant sent it, and only to a run
that has not stopped already. Then the run stops dispatching: every call of it not yet sent is
refused ``run_cancelled``, now or whenever it reaches the dispatcher (a call still waiting for
approval, a call the agent proposes later); a call already sent is never assumed failed, it
settles with its true outcome (its answer, or reconciliation's evidence). With ``compensate``
the run's done steps are compensated as a failed run's are, latest first; without it they stand.
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

RUN_CANCELLATION_REQUESTED = "RunCancellationRequested"


class RunCancellation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: str = Field(min_length=1, max_length=200)
    run_id: str = Field(min_length=1, max_length=200)
    operator_id: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=2000, description="Why, for the audit.")
    compensate: bool = Field(default=False, description=(
        "Undo the run's done steps with their tools' compensations (as for a failed run); "
        "by default they stand."))
    decided_at: AwareDatetime
