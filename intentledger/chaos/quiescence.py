"""When a scenario is over, and when one of its calls has got as far as a fault or a proposal
waits for: judged on positions and states, never on sleeps.

Quiet means every outbox is drained, every service's consumer group has committed everything in
the topics it reads, no call of the scenario's runs is in a state the dispatcher will still act
on, every accepted call has reached the dispatcher or stopped before it (denied, awaiting
approval), and the projection shows each call in the dispatcher's state. It must hold on two
consecutive looks, so an event in flight between two of these records is not missed.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import asyncpg

from intentledger.chaos.facts import schemas_with
from intentledger.chaos.positions import Positions
from shared.errors import is_retryable

MOVING = ("AUTHORIZED", "INTENT_RECORDED", "DISPATCHING", "UNKNOWN", "RECONCILING")
"""The dispatcher will step a call in these states again without anyone's help."""
STOPPED_BEFORE_DISPATCH = ("DENIED", "AWAITING_APPROVAL", "EXPIRED", "REJECTED")
STATE_RANK = {"AUTHORIZED": 1, "INTENT_RECORDED": 2, "DISPATCHING": 3, "UNKNOWN": 4,
              "RECONCILING": 5}
"""How far along a call in flight is; every state after these is a settled one."""
SETTLED_RANK = 6
LOOK_INTERVAL_S = 0.5


@dataclass(frozen=True)
class Look:
    outbox_pending: int
    lag: dict[str, int]
    moving_calls: int
    undelivered_calls: int
    projection_behind: int

    @property
    def quiet(self) -> bool:
        return not (self.outbox_pending or any(self.lag.values()) or self.moving_calls
                    or self.undelivered_calls or self.projection_behind)

    def __str__(self) -> str:
        lag = ", ".join(f"{group} {n}" for group, n in self.lag.items() if n) or "none"
        return (f"outbox pending {self.outbox_pending}; consumer lag {lag}; calls moving "
                f"{self.moving_calls}; accepted but not at the dispatcher {self.undelivered_calls};"
                f" projection behind on {self.projection_behind}")


async def look(pool: asyncpg.Pool, positions: Positions, groups: list[str], run_ids: list[str],
               accepted: list[str]) -> Look:
    async with pool.acquire() as conn:
        schemas = await schemas_with(conn, "outbox")
        pending = 0
        for schema in schemas:
            pending += await conn.fetchval(
                f"SELECT count(*) FROM \"{schema}\".outbox WHERE status = 'pending'")
        moving = await conn.fetchval(
            "SELECT count(*) FROM dispatcher.calls WHERE run_id = ANY($1::text[]) "
            "AND state = ANY($2::text[])", run_ids, list(MOVING))
        undelivered = await conn.fetchval(
            "SELECT count(*) FROM unnest($1::uuid[]) AS a(id) "
            "WHERE NOT EXISTS (SELECT 1 FROM dispatcher.calls c WHERE c.logical_call_id = a.id) "
            "AND NOT EXISTS (SELECT 1 FROM projection.calls p WHERE p.logical_call_id = a.id "
            "                AND p.state = ANY($2::text[]))",
            accepted, list(STOPPED_BEFORE_DISPATCH))
        behind = await conn.fetchval(
            "SELECT count(*) FROM dispatcher.calls d LEFT JOIN projection.calls p "
            "USING (logical_call_id) WHERE d.run_id = ANY($1::text[]) "
            "AND p.state IS DISTINCT FROM d.state", run_ids)
    return Look(pending, await positions.lag(groups), moving, undelivered, behind)


async def wait_quiet(pool: asyncpg.Pool, positions: Positions, groups: list[str],
                     run_ids: list[str], accepted: list[str], deadline: float) -> tuple[bool, Look]:
    """True once two consecutive looks are quiet; False with the last look at ``deadline``."""
    previous_quiet = False
    while True:
        try:
            current = await look(pool, positions, groups, run_ids, accepted)
        except Exception as error:  # a connection the restarted PostgreSQL dropped, and such
            if not is_retryable(error) or time.monotonic() >= deadline:
                raise
            previous_quiet = False
            await asyncio.sleep(LOOK_INTERVAL_S)
            continue
        if current.quiet and previous_quiet:
            return True, current
        previous_quiet = current.quiet
        if time.monotonic() >= deadline:
            return False, current
        await asyncio.sleep(LOOK_INTERVAL_S)


async def has_reached(pool: asyncpg.Pool, logical_call_id: str, state: str | None,
                      attempts: int | None) -> bool:
    """Whether the call is in ``state`` or a later one and has started ``attempts``; False
    while PostgreSQL is down (that may be the scenario)."""
    try:
        row = await pool.fetchrow(
            "SELECT state, (SELECT count(*) FROM dispatcher.attempts a WHERE a.logical_call_id"
            " = c.logical_call_id) AS attempts FROM dispatcher.calls c"
            " WHERE logical_call_id = $1::uuid", logical_call_id)
    except Exception as error:
        if not is_retryable(error):
            raise
        return False
    return row is not None and (state is None or STATE_RANK.get(row["state"], SETTLED_RANK)
                                >= STATE_RANK.get(state, SETTLED_RANK)) \
        and (attempts is None or row["attempts"] >= attempts)
