"""An attempt's rows besides its start (``moves.py``): read for a batch of steps, and answered
once. The first answer of an attempt is its evidence (a receipt, an HTTP response); a copy
redelivered later, or a second in the same consumed batch, changes nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import asyncpg

from services.dispatcher.repository import SCHEMA, Attempt

ATTEMPTS = (f"ARRAY(SELECT ROW(logical_call_id, attempt, kind, fence, worker_id, started_at,"
            f" deadline_at, status, detail, receipt, finished_at) FROM {SCHEMA}.attempts"
            " WHERE logical_call_id = ANY($1::uuid[]) ORDER BY logical_call_id, attempt)")
"""SQL, an array: the attempts of the calls ``$1``, each a row of the call's id and then an
``Attempt``'s fields in their order (``reads.py`` asks for it beside the batch's other reads)."""


def attempts_from(rows: list[tuple], call_ids: list[uuid.UUID]
                  ) -> dict[uuid.UUID, list[Attempt]]:
    """Each call's attempts, in order (a call without any maps to an empty list)."""
    found: dict[uuid.UUID, list[Attempt]] = {call_id: [] for call_id in call_ids}
    for logical_call_id, *values in rows:
        attempt = Attempt(*values)
        if attempt.receipt is not None:  # jsonb in a row comes as its text
            attempt = replace(attempt, receipt=json.loads(attempt.receipt))
        found[logical_call_id].append(attempt)
    return found


@dataclass(frozen=True)
class Answer:
    """What an attempt came to: its status, a line for people, the receipt as evidence."""

    logical_call_id: uuid.UUID
    attempt: int
    status: str
    detail: str
    receipt: dict[str, Any] | None


async def finish_attempts(conn: asyncpg.Connection,
                          answers: Sequence[Answer]) -> set[tuple[uuid.UUID, int]]:
    """Record what attempts came to, once each: the first answer is the evidence; a later
    copy (a redelivered receipt, a second one in ``answers``) changes nothing. Returns the
    (call, attempt) pairs this recorded."""
    first: dict[tuple[uuid.UUID, int], Answer] = {}
    for answer in answers:
        first.setdefault((answer.logical_call_id, answer.attempt), answer)
    rows = await conn.fetch(
        f"UPDATE {SCHEMA}.attempts a SET status = n.status, detail = n.detail,"
        " receipt = n.receipt, finished_at = now()"
        " FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::jsonb[])"
        "   AS n(logical_call_id, attempt, status, detail, receipt)"
        " WHERE a.logical_call_id = n.logical_call_id AND a.attempt = n.attempt"
        "   AND a.status IS NULL RETURNING a.logical_call_id, a.attempt",
        [key[0] for key in first], [key[1] for key in first],
        [answer.status for answer in first.values()], [answer.detail for answer in first.values()],
        [json.dumps(answer.receipt) if answer.receipt else None for answer in first.values()])
    return {(row["logical_call_id"], row["attempt"]) for row in rows}


async def finish_attempt(conn: asyncpg.Connection, answer: Answer) -> bool:
    """``finish_attempts`` of one; False if the attempt had its answer already."""
    return (answer.logical_call_id, answer.attempt) in await finish_attempts(conn, [answer])
