"""The wallet forgets operation keys past its retention, as the payment APIs it stands for do.

The tool registry declares this window to the ledger (``retry.key_retention_seconds``) and
the dispatcher never resends under a key, nor believes a lookup's "not found", once the
wallet may have forgotten it (docs/dispatch.md). The reference wallet forgets for real so
that promise is tested against a downstream that would debit twice, not one that cannot.
The debit stays; only the key is forgotten, in bounded batches.
"""

from __future__ import annotations

import logging

import asyncpg

from downstreams.wallet.repository import SCHEMA
from shared.db.housekeeping import in_batches
from shared.downstream.idempotent_write import forget_keys

log = logging.getLogger(__name__)
BATCH = 1000


async def forget_all(pool: asyncpg.Pool, retention_s: float) -> int:
    """Every key claimed more than ``retention_s`` ago; how many."""
    forgotten = await in_batches(pool, BATCH, lambda conn: forget_keys(conn, SCHEMA, retention_s,
                                                                       BATCH))
    if forgotten:
        log.info("wallet: forgot %d operation keys older than %g s", forgotten, retention_s)
    return forgotten
