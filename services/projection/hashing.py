"""The projection hash of a run: a fingerprint of its run row and of the set of its call rows.

Canonical means independent of everything but the values: columns by name, keys sorted at every
depth, timestamps in UTC with microseconds, uuids as text. Both sides of a comparison are read
back from PostgreSQL, so a value's type never depends on whether it was computed or stored. The
run row's own ``projection_hash``, ``reducer_version`` and tally are not hashed (they describe
the hash).

The calls enter as a sum (mod 2**256) of one SHA-256 per call row, so the projector updates a
run's hash from the one call that changed (take its old row's digest away, add its new one)
instead of reading and hashing every call of the run again for each event: the same value as
hashing them all, in any order. The hash is a fingerprint for telling whether a projection and
its replay (or its rows and its stored hash) agree, not a seal: whoever can write the rows can
write the hash too, and an additive hash of this width is not built to resist someone choosing
rows so that two sets collide.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime

from services.projection.reducer import CallRow, RunRow, columns
from shared.runs import RunKey

MODULUS = 2**256


def run_hash(run: RunRow, calls: Iterable[CallRow]) -> str:
    """From every row of the run (as ``intentledger replay --verify`` recomputes it)."""
    return sealed(run, calls_digest(calls))


def sealed(run: RunRow, digest: int) -> str:
    """From the run row and the digest of its calls (as the projector keeps it)."""
    return hashlib.sha256(_hashed(run) + f"\n{digest:064x}".encode()).hexdigest()


def calls_digest(calls: Iterable[CallRow]) -> int:
    return sum(call_digest(call) for call in calls) % MODULUS


def call_digest(call: CallRow) -> int:
    return int.from_bytes(hashlib.sha256(_hashed(call)).digest(), "big")


def v1_run_hash(run: RunRow, calls: Iterable[CallRow]) -> str:
    """``projection.v1``: sha256 over the run row and every call row, sorted by id. Runs hashed
    by it keep that hash until their next event."""
    document = {"run": columns(run),
                "calls": [columns(call) for call in sorted(calls, key=lambda c: c.logical_call_id)]}
    return hashlib.sha256(json.dumps(document, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False, default=scalar).encode()).hexdigest()


RUN_HASHES: Mapping[str, Callable[[RunRow, Iterable[CallRow]], str]] = {
    "projection.v1": v1_run_hash, "projection.v2": run_hash}
"""Each reducer version's run hash, to verify a stored hash by the version that computed it."""


def overall_hash(run_hashes: Mapping[RunKey, str]) -> str:
    """One hash for a set of runs: their per-run hashes, in (tenant, run id) order."""
    lines = "".join(f"{json.dumps([run.tenant_id, run.run_id])}\t{digest}\n"
                    for run, digest in sorted(run_hashes.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def record(row: RunRow | CallRow) -> str:
    """One row in canonical form, for a person comparing two of them."""
    return json.dumps(columns(row), sort_keys=True, ensure_ascii=False, default=scalar)


def _hashed(row: RunRow | CallRow) -> bytes:
    """One row in canonical form, as hashed."""
    return json.dumps(columns(row), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=scalar).encode()


def scalar(value: object) -> str:
    """JSON for the two types the rows hold that JSON lacks, in one canonical form: what the
    hash is over and the tally keeps."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"no canonical form for {type(value).__name__}")
