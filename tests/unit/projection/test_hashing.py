"""The run hash of each reducer version: v2 (a run row and the sum of its call rows' digests)
is the value the projector reaches one call at a time, whatever the order; v1 (every row,
sorted) is still computed exactly as v1 did, so runs it hashed stay verifiable."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from services.projection.hashing import (MODULUS, RUN_HASHES, call_digest, calls_digest,
                                         run_hash, sealed)
from services.projection.reducer import REDUCER_VERSION, CallRow, RunRow

AT = datetime(2026, 3, 14, 9, 0, 0, 123456, tzinfo=UTC)
DEBIT = CallRow(
    logical_call_id=uuid.UUID(int=7), run_id="run-1", tenant_id="acme", principal_id="agent-7",
    provider_call_id="call_1", operation_key="order-7:debit", tool_name="wallet.debit",
    tool_version="1", arguments_hash="ab" * 32, state="SUCCEEDED", version=4, reason=None,
    policy_version="p1", worker_id="w-1", fence=1, attempts=1, receipt_id="r-1",
    result={"debit_id": "d-1", "balance_minor": 6000}, compensates=None, unknown_since=None,
    updated_at=AT, stage=3, last_event_id=uuid.UUID(int=9))
DENIED = replace(DEBIT, logical_call_id=uuid.UUID(int=8), state="DENIED", reason="no_rule_matched",
                 result=None, receipt_id=None, stage=2)
RUN = RunRow(run_id="run-1", tenant_id="acme", principal_id="agent-7", status="completed",
             calls=2, stop_reason="no_rule_matched", updated_at=AT, rejected_proposals=0)


def test_v1_hashes_a_run_as_v1_did():
    """The value the v1 code computed for these rows (git show 7cfc292:services/projection/
    hashing.py), so a run it stored still verifies."""
    assert RUN_HASHES["projection.v1"](RUN, [DEBIT, DENIED]) == (
        "cb91a5912aba76942db7596a27b3aa5e9ac89f443dd498615ca5c35b1c1178fb")


def test_v2_is_the_run_row_sealed_with_the_sum_of_its_call_digests_in_any_order():
    assert RUN_HASHES[REDUCER_VERSION] is run_hash
    digest = (call_digest(DEBIT) + call_digest(DENIED)) % MODULUS
    assert run_hash(RUN, [DEBIT, DENIED]) == run_hash(RUN, [DENIED, DEBIT]) == sealed(RUN, digest)


def test_moving_one_call_moves_the_digest_by_that_call_alone():
    moved = replace(DEBIT, attempts=2)
    digest = (calls_digest([DEBIT, DENIED]) - call_digest(DEBIT) + call_digest(moved)) % MODULUS
    assert digest == calls_digest([moved, DENIED])
    assert run_hash(RUN, [moved, DENIED]) != run_hash(RUN, [DEBIT, DENIED])


def test_any_changed_column_changes_the_hash():
    assert run_hash(replace(RUN, status="running"), [DEBIT, DENIED]) != run_hash(RUN, [DEBIT, DENIED])
    assert run_hash(RUN, [DEBIT]) != run_hash(RUN, [DEBIT, DENIED])
    assert run_hash(RUN, [replace(DEBIT, result={"debit_id": "d-2", "balance_minor": 6000}),
                          DENIED]) != run_hash(RUN, [DEBIT, DENIED])
