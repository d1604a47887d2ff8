"""``intentledger resolve``: an operator settles by hand a call reconciliation could not settle.

The command names the call and brings the evidence; the run it belongs to is read from the
dispatcher's record. It publishes a ``Resolution`` on ``ledger.resolutions`` like any resolution
tool would, then waits for the dispatcher's verdict: the resolution is applied by a step under the
run's lease (so it cannot race the dispatcher's own reconciliation), or refused with a reason
(the call is not unresolved, the signature does not prove the operator sent it, or the
policy's ``resolutions`` do not name this operator).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from shared.config import Endpoints
from shared.contracts.resolutions import RESOLUTION_REQUESTED, Resolution
from shared.identity.signatures import RESOLUTION
from shared.messaging.envelope import Envelope
from shared.operator.publish import Signer, publish

PRODUCER = "intentledger-cli"
SCHEMA = "dispatcher"
"""Where the intent and the verdicts on resolutions are recorded."""


class NoSuchIntent(Exception):
    """The dispatcher has no intent of that id; nothing was published."""


@dataclass(frozen=True)
class ResolutionRequest:
    logical_call_id: uuid.UUID
    outcome: str
    reason: str
    evidence: str
    receipt_id: str | None = None
    result: dict[str, Any] | None = None


async def resolve(endpoints: Endpoints, request: ResolutionRequest, *, topic: str,
                  signer: Signer, timeout_s: float = 60.0) -> dict[str, Any]:
    """Publish the resolution of ``signer.acting``, signed by ``signer``, and return the
    dispatcher's verdict: ``status`` applied, refused or pending (no verdict within
    ``timeout_s``), the call's ``state`` and any ``reason``."""
    conn = await asyncpg.connect(endpoints.database_url, server_settings={"application_name": PRODUCER})
    try:
        call = await conn.fetchrow(f"SELECT run_id, tenant_id FROM {SCHEMA}.calls "
                                   "WHERE logical_call_id = $1", request.logical_call_id)
        if call is None:
            raise NoSuchIntent(f"the dispatcher has no intent {request.logical_call_id}")
        resolution = Resolution(
            logical_call_id=request.logical_call_id, run_id=call["run_id"],
            outcome=request.outcome, operator_id=signer.acting, reason=request.reason,
            evidence=request.evidence,
            receipt_id=request.receipt_id, result=request.result, decided_at=datetime.now(UTC))
        envelope = Envelope.new(event_type=RESOLUTION_REQUESTED, run_id=call["run_id"],
                                producer=PRODUCER, payload=resolution.model_dump(mode="json"))
        await publish(endpoints.kafka_bootstrap, topic, envelope,
                      signature=signer.signature(envelope.value(), tenant_id=call["tenant_id"],
                                                 use=RESOLUTION))
        return await _verdict(conn, envelope.event_id, resolution.logical_call_id, timeout_s)
    finally:
        await conn.close()


async def _verdict(conn: asyncpg.Connection, event_id: uuid.UUID, logical_call_id: uuid.UUID,
                   timeout_s: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout_s
    while True:
        row = await conn.fetchrow(
            f"SELECT r.status, r.reason, c.state FROM {SCHEMA}.calls c LEFT JOIN "
            f"{SCHEMA}.resolutions r ON r.event_id = $1 WHERE c.logical_call_id = $2",
            event_id, logical_call_id)
        status = row["status"] or "pending"
        if status != "pending" or loop.time() > give_up:
            return {"event_id": str(event_id), "status": status, "reason": row["reason"],
                    "state": row["state"]}
        await asyncio.sleep(0.2)
