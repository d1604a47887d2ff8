"""The ``forge`` fault: an effect request written straight into a service's outbox, as a holder
of that service's database role can write one, with no capability.

The relay publishes whatever an outbox row names; what stands between such a row and the
downstream's books is the downstream's own check of the policy's signature
(``shared/downstream/capability_check.py``). The forgery is judged by the downstream's answer
on ``effects.receipts``: a refusal of its capability is the guarantee holding, anything else
is the forgery working.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg

from intentledger.chaos.positions import Positions
from shared.contracts.effect_requests import EFFECT_REQUESTED, EffectRequested
from shared.contracts.fault_protocol import Forge, substitute
from shared.contracts.tenants import is_tenant_id
from shared.messaging.envelope import Envelope, payload_of
from shared.messaging.outbox import OutboxMessage, insert_outbox_rows
from shared.topology import EFFECT_RECEIPTS

POLL_S = 0.5


async def forge(pool: asyncpg.Pool, positions: Positions, fault: Forge, nonce: str,
                deadline: float) -> dict | None:
    """Insert the forged row; the receipt answering it (its payload), or None if none came
    before ``deadline`` (``time.monotonic``)."""
    key = substitute(fault.operation_key, nonce)
    request = EffectRequested(
        operation_key=key, tool_name=fault.tool, tool_version=fault.tool_version,
        canonical_arguments=substitute(fault.arguments, nonce), attempt=1, fence=1,
        tenant_id=_tenant_of(key),
        logical_call_id=uuid.uuid5(uuid.NAMESPACE_URL, key),
        deadline_at=datetime.now(UTC) + timedelta(minutes=5), reply_topic=EFFECT_RECEIPTS)
    envelope = Envelope.new(event_type=EFFECT_REQUESTED, run_id=f"forged-{nonce}",
                            producer=fault.outbox, payload=request.model_dump(mode="json"))
    async with pool.acquire() as conn:  # one statement: committed on its own
        await insert_outbox_rows(conn, fault.outbox, [OutboxMessage(fault.topic, envelope)])
    while time.monotonic() < deadline:
        for record in await positions.since_start(EFFECT_RECEIPTS):
            payload = payload_of(record.value)
            if payload.get("operation_key") == key:
                return payload
        await asyncio.sleep(POLL_S)
    return None


def _tenant_of(key: str) -> str:
    """The tenant a forged request claims: the one its operation key names (``<tenant>:…``)."""
    tenant = key.partition(":")[0]
    if not is_tenant_id(tenant):
        raise ValueError(f"forged operation key {key!r} names no tenant (<tenant>:…)")
    return tenant
