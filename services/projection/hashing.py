"""The projection hash: sha256 over a canonical serialization of a run's rows.

Canonical means independent of everything but the values: columns by name, calls sorted by
intent's id, keys sorted at every depth, timestamps in UTC with microseconds, uuids as
text. Both sides of a comparison are read back from PostgreSQL, so a value's type never
depends on whether it was computed or stored. The run row's own ``projection_hash`` and
``reducer_version`` are not hashed (they describe the hash).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from services.projection.reducer import CallRow, RunRow, columns
from shared.runs import RunKey


def run_hash(run: RunRow, calls: Iterable[CallRow]) -> str:
    return hashlib.sha256(canonical(run, calls).encode()).hexdigest()


def overall_hash(run_hashes: Mapping[RunKey, str]) -> str:
    """One hash for a set of runs: their per-run hashes, in (tenant, run id) order."""
    lines = "".join(f"{json.dumps([run.tenant_id, run.run_id])}\t{digest}\n"
                    for run, digest in sorted(run_hashes.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def canonical(run: RunRow, calls: Iterable[CallRow]) -> str:
    document = {"run": columns(run),
                "calls": [columns(call) for call in sorted(calls, key=lambda c: c.logical_call_id)]}
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=scalar)


def record(row: RunRow | CallRow) -> str:
    """One row in the same canonical form, for a person comparing two of them."""
    return json.dumps(columns(row), sort_keys=True, ensure_ascii=False, default=scalar)


def scalar(value: object) -> str:
    """JSON for the two types the rows hold that JSON lacks (also how rows are sent to SQL)."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"no canonical form for {type(value).__name__}")
