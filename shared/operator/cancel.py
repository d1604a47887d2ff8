"""``intentledger runs cancel``: an operator stops a run.

It publishes a signed ``RunCancellationRequested`` on ``ledger.resolutions`` like any Kafka
client could, then waits for the dispatcher's verdict: applied (the run stops dispatching: its
calls not yet sent are refused ``run_cancelled``, its calls already sent settle with their true
outcome) or refused with a reason (the signature does not prove an operator of the run's tenant
sent it; the run had stopped already).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg

from shared.config import Endpoints
from shared.contracts.cancellations import RUN_CANCELLATION_REQUESTED, RunCancellation
from shared.identity.signatures import CANCELLATION
from shared.messaging.envelope import Envelope
from shared.operator.publish import Signer, publish
from shared.runs import RunKey

PRODUCER = "intentledger-cli"
SCHEMA = "dispatcher"
"""Where the dispatcher records its verdicts on cancellations."""


async def cancel_run(endpoints: Endpoints, run: RunKey, *, reason: str, compensate: bool,
                     topic: str, signer: Signer, timeout_s: float = 60.0) -> dict[str, Any]:
    """Publish the cancellation of ``run`` by ``signer.acting``, signed by ``signer``, and
    return the dispatcher's verdict: ``status`` applied, refused or pending (no verdict within
    ``timeout_s``), and any ``reason``."""
    cancellation = RunCancellation(tenant_id=run.tenant_id, run_id=run.run_id,
                                   operator_id=signer.acting, reason=reason,
                                   compensate=compensate, decided_at=datetime.now(UTC))
    envelope = Envelope.new(event_type=RUN_CANCELLATION_REQUESTED, run_id=run.run_id,
                            producer=PRODUCER, payload=cancellation.model_dump(mode="json"))
    await publish(endpoints.kafka_bootstrap, topic, envelope,
                  signature=signer.signature(envelope.value(), tenant_id=run.tenant_id,
                                             use=CANCELLATION))
    conn = await asyncpg.connect(endpoints.database_url,
                                 server_settings={"application_name": PRODUCER})
    try:
        return await verdict(conn, envelope.event_id, timeout_s)
    finally:
        await conn.close()


async def verdict(conn: asyncpg.Connection, event_id: uuid.UUID,
                  timeout_s: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout_s
    while True:
        row = await conn.fetchrow(f"SELECT status, reason FROM {SCHEMA}.cancellations"
                                  " WHERE event_id = $1", event_id)
        status = row["status"] if row else "pending"
        if status != "pending" or loop.time() > give_up:
            return {"event_id": str(event_id), "status": status,
                    "reason": row["reason"] if row else None}
        await asyncio.sleep(0.2)
