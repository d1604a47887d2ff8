"""Approval requests nobody answered in time are denied (``approval_request_expired``).

A call must not wait forever: the sweep runs in every policy replica, claims lapsed requests
with ``FOR UPDATE SKIP LOCKED`` (two replicas never deny the same call twice, and a call an
approval is being applied to right now is left to that transaction) and denies them through
the outbox, in the transaction that changes the row.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import asyncpg

from services.policy import repository as repo
from services.policy.outcomes import Destinations, announce
from services.policy.verdicts import denial
from shared.contracts.authorizations import PolicyReason
from shared.db.unit_of_work import UnitOfWork
from shared.errors import is_retryable

log = logging.getLogger(__name__)


async def sweep_once(pool: asyncpg.Pool, to: Destinations, batch_size: int = 100) -> int:
    """Deny up to ``batch_size`` lapsed requests; returns how many."""
    async with UnitOfWork(pool, repo.SCHEMA) as uow:
        now = datetime.now(UTC)
        lapsed = await repo.lapsed_for_update(uow.connection, now, batch_size)
        for stored in lapsed:
            verdict = denial(stored.decision_id, stored.policy_version, stored.rule,
                             PolicyReason.APPROVAL_REQUEST_EXPIRED,
                             f"no quorum of approvals by {stored.expires_at.isoformat()}",
                             now, stored.inputs)
            await repo.conclude(uow.connection, stored, verdict)
            announce(uow, to, stored.intent, verdict, None)
        await uow.commit()
    if lapsed:
        log.info("denied %d approval request(s) nobody answered in time", len(lapsed))
    return len(lapsed)


async def sweep_forever(pool: asyncpg.Pool, to: Destinations, interval_s: float,
                        batch_size: int = 100) -> None:
    """Until cancelled; a full batch is followed at once by the next one."""
    while True:
        try:
            denied = await sweep_once(pool, to, batch_size)
        except Exception as error:
            if not is_retryable(error):
                raise
            log.warning("approval expiry sweep failed (%s); retrying", error)
            denied = 0
        if denied < batch_size:
            await asyncio.sleep(interval_s)
