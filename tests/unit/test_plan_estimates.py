"""The hot-query tests' check of what a plan expects to read (``tests/support/plans.py``), on
plans of the shapes PostgreSQL gave: a share of a table found under a sort is flagged, the
same share walked in index order under a ``Limit`` is not (it stops at the limit)."""

from __future__ import annotations

from tests.support.plans import CUSTOM, GENERIC, overestimated_scans


def scan(rows: int) -> dict:
    return {"Node Type": "Index Scan", "Relation Name": "calls", "Plan Rows": rows}


def limit(*children: dict) -> dict:
    return {"Node Type": "Limit", "Plan Rows": 50, "Plans": list(children)}


def node(kind: str, *children: dict) -> dict:
    return {"Node Type": kind, "Plan Rows": 50, "Plans": list(children)}


def test_a_share_of_a_table_sorted_before_its_limit_is_flagged():
    """The claim that hid ``now``: every due call estimated, sorted, then the batch taken."""
    plan = limit(node("LockRows", node("Unique", node("Sort", scan(13_333)))))
    assert overestimated_scans([(CUSTOM, "claim", plan)], {"calls"}, 400) == [
        "expects 13333 rows of calls: claim"]


def test_an_index_walked_in_order_under_its_limit_is_not():
    """The key expiry's sweep: oldest first through its index, stopped at the batch size."""
    plan = limit(node("LockRows", scan(13_333)))
    assert overestimated_scans([(CUSTOM, "sweep", plan)], {"calls"}, 400) == []


def test_a_scan_with_no_limit_above_it_is_flagged_and_a_few_rows_are_not():
    plan = node("Nested Loop", scan(20), node("Hash", scan(5_000)))
    assert overestimated_scans([(CUSTOM, "join", plan)], {"calls"}, 400) == [
        "expects 5000 rows of calls: join"]


def test_generic_plans_and_other_tables_are_left_out():
    """A generic plan sees no parameter, and is kept only when it costs no more than a custom
    one; a small table may be read whole."""
    plan = node("Sort", scan(13_333))
    assert overestimated_scans([(GENERIC, "claim", plan)], {"calls"}, 400) == []
    assert overestimated_scans([(CUSTOM, "claim", plan)], {"leases"}, 400) == []
