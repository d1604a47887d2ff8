"""A call's withdrawal as any signer can publish one, and what the policy made of it: the
intake's answer a withdrawal names, the policy's record of each withdrawal, the call's
decision. Read from the services' own tables, so a test asserts the business outcome."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from shared.contracts.withdrawals import CALL_WITHDRAWAL_REQUESTED, CallWithdrawal
from shared.identity.signatures import WITHDRAWAL, sign
from shared.messaging.envelope import Envelope
from shared.operator.publish import publish
from tests.support.dispatch import Stage
from tests.support.identities import local
from tests.support.kafka import wait_for


async def intake_answer(pool, stage: Stage, run_id: str) -> dict:
    """The intake's answer to the first call of ``run_id`` (its ``ProposalOutcome``)."""
    async def found():
        return await pool.fetchval(
            "SELECT envelope->'payload' FROM proposal_intake.outbox WHERE topic = $1"
            " AND envelope->'payload'->>'run_id' = $2", stage.results_topic(), run_id)
    payload = await wait_for(found, timeout=60)
    assert payload is not None, f"the intake never answered run {run_id}"
    return json.loads(payload)


async def withdraw(stage: Stage, intent: dict, *, names: str, signer: str, tenant: str = "acme",
                   signed_for: str = "acme", use: str = WITHDRAWAL, agent: str | None = None,
                   person: str | None = None, issued: datetime | None = None) -> uuid.UUID:
    """A withdrawal of the intake's ``intent`` naming ``names``, signed by ``signer`` (for
    ``agent`` and ``person``, as a gateway signs)."""
    withdrawal = CallWithdrawal(tenant_id=tenant, run_id=intent["run_id"],
                                logical_call_id=intent["logical_call_id"], principal_id=names,
                                reason="changed my mind", decided_at=datetime.now(UTC))
    envelope = Envelope.new(event_type=CALL_WITHDRAWAL_REQUESTED, run_id=intent["run_id"],
                            producer="test", payload=withdrawal.model_dump(mode="json"))
    await publish(stage.endpoints.kafka_bootstrap, stage.approvals, envelope, signature=sign(
        envelope.value(), local().signing_key(signer), principal_id=signer, tenant_id=signed_for,
        use=use, agent=agent, person=person, now=issued))
    return envelope.event_id


async def recorded(pool, event_ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple[str, str | None]]:
    """Each withdrawal's ``(outcome, reason_code)`` in the policy's record, once all are in."""
    async def all_there():
        rows = await pool.fetch("SELECT event_id, outcome, reason_code FROM policy.withdrawals"
                                " WHERE event_id = ANY($1::uuid[])", event_ids)
        return rows if len(rows) == len(event_ids) else None
    rows = await wait_for(all_there, timeout=60)
    assert rows, "the policy did not record every withdrawal"
    return {row["event_id"]: (row["outcome"], row["reason_code"]) for row in rows}


async def decision(pool, intent: dict) -> tuple[str, str | None]:
    """The policy's ``(outcome, reason_code)`` for the intake's ``intent``."""
    row = await pool.fetchrow(
        "SELECT outcome, reason_code AS reason FROM policy.decisions"
        " WHERE logical_call_id = $1", uuid.UUID(intent["logical_call_id"]))
    return row["outcome"], row["reason"]
