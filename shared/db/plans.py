"""Statements PostgreSQL plans once per connection instead of on every execution.

A prepared statement is planned for its parameters' values (a custom plan) on each of its
first five executions; from then on PostgreSQL runs the plan it made without them (the
generic plan) unless that plan looks dearer than the custom ones did. For a statement whose
parameters are arrays it always does: a custom plan is costed for the array at hand, one or two
elements at tens of proposals a second, the generic plan for ten, so the statement is planned
afresh on every execution for good. The dispatcher's batch reads spent 0.5 ms planning for
0.1 ms running, in both of every proposal's dispatcher transactions (bench/README.md,
"Planned once").

``hidden`` hands the planner a parameter through a scalar subquery, whose value no plan can
see: every plan is then costed for the same length, and the generic plan, which costs no
planning, is kept. Forcing generic plans on whole pools was measured twice and not kept: a
generic plan costed for ten rows joins a small table by reading it whole, and what it saved
in planning it lost in execution. So a statement written with ``hidden`` must be right for
any length without its estimate: each element looked up by its key (a LATERAL subquery, which
the planner cannot turn into a hash of the table, or ``= ANY`` of a key), or, where an
``UPDATE`` joins the rows it is given (``FROM unnest(...)``), a join whose generic plan the
hot-query tests check for whole-table reads on tables with history.

A plan made once is made when a connection first runs the statement: on a new deployment,
over tables not analysed yet, which the planner takes for ten pages. At the packaged
``random_page_cost`` of 4, reading ten pages whole looks cheaper than looking ten keys up, and
such a plan read its tables whole until autovacuum first analysed them; the server runs 1.1
(``shared.infra.postgres_local.SERVER_SETTINGS``), at which the keys are looked up.
"""

from __future__ import annotations


def hidden(placeholder: str, sql_type: str) -> str:
    """SQL: the parameter ``placeholder`` (``'$1'``) of ``sql_type`` (``'uuid[]'``), its value
    hidden from the planner. The outer cast keeps ``= ANY(...)`` reading it as an array, not
    as a subquery's rows."""
    return f"(SELECT {placeholder}::{sql_type})::{sql_type}"


def hidden_columns(first: int, *sql_types: str) -> str:
    """SQL: the parameters ``$first``, ``$first + 1``, ... of ``sql_types`` (``'uuid[]'``),
    each ``hidden``, comma-separated: the column arrays an ``unnest`` takes."""
    return ", ".join(hidden(f"${first + n}", sql_type) for n, sql_type in enumerate(sql_types))


def run_keys(tenants: str, run_ids: str) -> str:
    """SQL, a relation ``k(tenant_id, run_id)``: the run keys of the text-array parameters
    ``tenants`` and ``run_ids`` (``'$1'``), hidden, each once, in run order. A LATERAL lookup
    that locks each run as ``k`` is walked locks them in that order, as every batch does, so
    two batches wait for each other instead of deadlocking."""
    return (f"(SELECT DISTINCT * FROM unnest({hidden(tenants, 'text[]')},"
            f" {hidden(run_ids, 'text[]')}) AS k(tenant_id, run_id) ORDER BY 1, 2) AS k")
