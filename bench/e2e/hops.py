"""Where the time goes: per-hop latency of every settled call, from the ledger's own timestamps
(the events' ``occurred_at`` in the projection's history, the wallet's debit row, the settled
announcement) and the harness's clock at either end."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime
from typing import Any

import asyncpg

from bench.e2e.names import RunNames, proposal_index
from bench.e2e.proposals import Proposals
from bench.e2e.stats import summary

HOPS = ("publish → intake accepted", "intake → policy allowed", "policy → dispatcher intent",
        "intent → attempt started", "attempt → wallet debit", "wallet debit → result recorded",
        "result → settled announced", "announced → agent received")
"""The hops in pipeline order; each ends where the next starts."""


async def hop_latencies(pool: asyncpg.Pool, names: RunNames,
                        proposals: Proposals) -> dict[str, Any]:
    """The hops' names and, per step, a summary of each hop's milliseconds."""
    rows = await pool.fetch(
        "SELECT lc.provider_call_id AS call_id,"
        " min(e.occurred_at) FILTER (WHERE e.event_type = 'ProposalAccepted') AS accepted,"
        " min(e.occurred_at) FILTER (WHERE e.event_type = 'AuthorizationAllowed') AS authorized,"
        " min(e.occurred_at) FILTER (WHERE e.event_type = 'DispatchIntentRecorded') AS intent,"
        " min(e.occurred_at) FILTER (WHERE e.event_type = 'ToolAttemptStarted') AS attempt,"
        " max(e.occurred_at) FILTER (WHERE e.event_type = 'ToolResultRecorded') AS result,"
        " (SELECT d.created_at FROM wallet.debits d"  # by its key: debits has no index by call
        "   WHERE d.operation_key = lc.operation_key) AS debited"
        " FROM proposal_intake.logical_calls lc"
        " JOIN projection.events e ON e.logical_call_id = lc.logical_call_id"
        " WHERE lc.run_id LIKE $1"
        " GROUP BY lc.provider_call_id, lc.logical_call_id, lc.operation_key",
        names.runs_like)
    per_step: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        i = proposal_index(row["call_id"])
        if i is None or i >= len(proposals):
            continue
        points = [proposals.t_pub[i],
                  *(_epoch(row[c]) for c in ("accepted", "authorized", "intent", "attempt",
                                             "debited", "result")),
                  proposals.t_set_occurred[i], proposals.t_set[i]]
        for name, start, end in zip(HOPS, points, points[1:], strict=False):
            if not (math.isnan(start) or math.isnan(end)):
                per_step[proposals.step_of[i]][name].append((end - start) * 1000)
    return {"hops": list(HOPS), "per_step": {
        str(step): {name: summary(values) for name, values in hops.items()}
        for step, hops in sorted(per_step.items())}}


def _epoch(value: datetime | None) -> float:
    return value.timestamp() if value is not None else math.nan
