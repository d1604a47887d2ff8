"""An attempt's rows besides its start (``moves.py``): read for a batch of steps, and answered
once. The first answer of an attempt is its evidence (a receipt, an HTTP response); a copy
redelivered later, or a second in the same consumed batch, changes nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import asyncpg

from services.dispatcher.repository import SCHEMA, Attempt
from shared.db.plans import hidden, hidden_columns

ATTEMPTS = (f"ARRAY(SELECT ROW(logical_call_id, attempt, kind, fence, worker_id, started_at,"
            f" deadline_at, status, detail, receipt, finished_at) FROM {SCHEMA}.attempts"
            f" WHERE logical_call_id = ANY({hidden('$1', 'uuid[]')}) ORDER BY logical_call_id,"
            " attempt)")
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
    (call, attempt) pairs this recorded. The caller holds the calls' locks."""
    first: dict[tuple[uuid.UUID, int], Answer] = {}
    for answer in answers:
        first.setdefault((answer.logical_call_id, answer.attempt), answer)
    rows = await conn.fetch(_answering(
        f"unnest({hidden_columns(1, *_ANSWER_ARRAYS)})"
        " AS n(logical_call_id, attempt, status, detail, receipt)"), *_columns(first.values()))
    return {(row["logical_call_id"], row["attempt"]) for row in rows}


@dataclass(frozen=True)
class ReceiptCall:
    """A call that receipts named, as its row stands: the key a receipt must carry to answer
    it, and the tool that answered."""

    operation_key: str
    tool_name: str
    tool_version: str


async def answer_receipts(conn: asyncpg.Connection, answers: Sequence[tuple[str, Answer]]
                          ) -> tuple[dict[uuid.UUID, ReceiptCall], set[tuple[uuid.UUID, int]]]:
    """``finish_attempts`` for receipts, each an operation key and an answer, in one statement
    that locks the calls they name before it answers their attempts: in id order, as every
    batch locks calls, so two cannot deadlock, and no attempt is written before its call is
    held. A receipt that carries another key than its call's answers nothing, and does not
    hide a later receipt with the right key. Returns the calls found, and the (call, attempt)
    pairs this recorded.

    One statement reads in one snapshot, taken before the locks are waited for. An attempt
    whose answer the lock's holder committed meanwhile is re-checked when this statement
    comes to update it (``status IS NULL`` no longer holds: not recorded, as with two
    statements). The attempt a receipt answers was committed with the request, before the
    request was published: it is in that snapshot."""
    first: dict[tuple[uuid.UUID, int, str], Answer] = {}
    for operation_key, answer in answers:
        first.setdefault((answer.logical_call_id, answer.attempt, operation_key), answer)
    row = await conn.fetchrow(
        f"WITH locked AS MATERIALIZED (SELECT logical_call_id, operation_key, tool_name,"
        f"   tool_version FROM {SCHEMA}.calls WHERE logical_call_id = ANY({hidden('$1', 'uuid[]')})"
        "   ORDER BY logical_call_id FOR UPDATE),"
        " answered AS (" + _answering(
            f"unnest({hidden_columns(2, *_ANSWER_ARRAYS, 'text[]')})"
            " AS n(logical_call_id, attempt, status, detail, receipt, operation_key)"
            " JOIN locked l ON l.logical_call_id = n.logical_call_id"
            "   AND l.operation_key = n.operation_key") + ")"
        " SELECT ARRAY(SELECT ROW(logical_call_id, operation_key, tool_name, tool_version)"
        "   FROM locked) AS calls,"
        " ARRAY(SELECT ROW(logical_call_id, attempt) FROM answered) AS answered",
        sorted({answer.logical_call_id for _, answer in answers}), *_columns(first.values()),
        [operation_key for _, _, operation_key in first])
    return ({call[0]: ReceiptCall(*call[1:]) for call in row["calls"]},
            {(answered[0], answered[1]) for answered in row["answered"]})


def _answering(answers: str) -> str:
    """SQL: record the answer of each attempt named by the rows ``answers`` (``n``: call,
    attempt, status, detail, receipt), unless the attempt has its answer already."""
    return (f"UPDATE {SCHEMA}.attempts a SET status = n.status, detail = n.detail,"
            f" receipt = n.receipt, finished_at = now() FROM {answers}"
            " WHERE a.logical_call_id = n.logical_call_id AND a.attempt = n.attempt"
            "   AND a.status IS NULL RETURNING a.logical_call_id, a.attempt")


_ANSWER_ARRAYS = ("uuid[]", "int[]", "text[]", "text[]", "jsonb[]")
"""The types of ``_columns``' arrays, hidden from the planner where they are unnested: so
the statements are planned once per connection (``shared.db.plans``)."""


def _columns(answers: Iterable[Answer]) -> list[list[Any]]:
    """The answers as the arrays ``_answering``'s rows are unnested from."""
    answers = list(answers)
    return [[answer.logical_call_id for answer in answers], [answer.attempt for answer in answers],
            [answer.status for answer in answers], [answer.detail for answer in answers],
            [json.dumps(answer.receipt) if answer.receipt else None for answer in answers]]


async def finish_attempt(conn: asyncpg.Connection, answer: Answer) -> bool:
    """``finish_attempts`` of one; False if the attempt had its answer already."""
    return (answer.logical_call_id, answer.attempt) in await finish_attempts(conn, [answer])
