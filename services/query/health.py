"""The console's live counts and health charts, as the query API answers them.

Counts run under the caller's row-level security like every read. The health report is for
operators: relay backlog and consumer lag as the projection sampled them
(``services/projection/health_sampler.py``), and three rates derived from the event history
in fixed buckets — retry amplification (attempts started per call attempted), duplicates
prevented (a proposal answered with its existing intent; an effect settled from the
downstream's own receipt instead of a second send) and compensation outcomes.
"""

from __future__ import annotations

from collections import defaultdict

import asyncpg

from services.query.filters import CountFilters
from services.query.models import Counts, HealthReport, Point, Series
from shared.contracts.dispatch import (COMPENSATION_SETTLED, TOOL_ATTEMPT_STARTED,
                                       TOOL_EFFECT_RECONCILED)
from shared.contracts.intake import DUPLICATE_PROPOSAL

WINDOW_S = 3600
BUCKET_S = 300
_BUCKET = f"to_timestamp(floor(extract(epoch FROM occurred_at) / {BUCKET_S}) * {BUCKET_S})"
_RECENT = f"occurred_at >= now() - interval '{WINDOW_S} seconds'"


async def counts(conn: asyncpg.Connection, filters: CountFilters) -> Counts:
    where, args = ("WHERE tenant_id = $1", [filters.tenant]) if filters.tenant else ("", [])
    runs = await conn.fetch(f"SELECT status, count(*) AS n FROM projection.runs {where} "
                            "GROUP BY status", *args)
    calls = await conn.fetch(f"SELECT state, count(*) AS n FROM projection.calls {where} "
                             "GROUP BY state", *args)
    return Counts(runs={row["status"]: row["n"] for row in runs},
                  calls={row["state"]: row["n"] for row in calls})


UNITS = {"relay_backlog": "rows", "consumer_lag": "records",
         "retry_amplification": "attempts per call", "duplicates_prevented": "events",
         "compensations": "calls"}


async def health(conn: asyncpg.Connection, _filters: None = None) -> HealthReport:
    rows = [*await _sampled(conn), *await _retry_amplification(conn),
            *await _per_event_type(conn, "duplicates_prevented",
                                   (DUPLICATE_PROPOSAL, TOOL_EFFECT_RECONCILED), "event_type"),
            *await _per_event_type(conn, "compensations", (COMPENSATION_SETTLED,),
                                   "envelope -> 'payload' ->> 'state'")]
    return HealthReport(window_s=WINDOW_S, bucket_s=BUCKET_S, series=_series(rows))


# Each query answers rows of (name, subject, bucket, value), oldest bucket first per series.

async def _sampled(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT metric AS name, subject, bucket, value FROM projection.health_samples "
        f"WHERE bucket >= now() - interval '{WINDOW_S} seconds' ORDER BY metric, subject, bucket")


async def _retry_amplification(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT 'retry_amplification' AS name, 'all' AS subject, {_BUCKET} AS bucket, "
        "count(*)::float8 / count(DISTINCT logical_call_id) AS value FROM projection.events "
        f"WHERE event_type = $1 AND logical_call_id IS NOT NULL AND {_RECENT} GROUP BY 3 ORDER BY 3",
        TOOL_ATTEMPT_STARTED)


async def _per_event_type(conn: asyncpg.Connection, name: str, event_types: tuple[str, ...],
                          subject: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT $1::text AS name, {subject} AS subject, {_BUCKET} AS bucket, "
        "count(*)::float8 AS value FROM projection.events "
        f"WHERE event_type = ANY($2::text[]) AND {_RECENT} GROUP BY 2, 3 ORDER BY 2, 3",
        name, list(event_types))


def _series(rows: list[asyncpg.Record]) -> list[Series]:
    points: dict[tuple[str, str], list[Point]] = defaultdict(list)
    for row in rows:
        points[(row["name"], row["subject"] or "unknown")].append(
            Point(at=row["bucket"], value=row["value"]))
    return [Series(name=name, subject=subject, unit=UNITS[name], points=found)
            for (name, subject), found in points.items()]
