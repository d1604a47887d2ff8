"""A run's name: the tenant it belongs to and the run id its agent chose.

Run ids are the agents' own strings, so two tenants may pick the same one (``order-42``, a
counter, a guess). A run is therefore never named by its id alone anywhere inside the ledger:
every table, lock, lease and budget of a run is keyed by this pair, so naming another
tenant's run id only ever names a run of one's own (docs/design.md, "Runs are named by
tenant and run id").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class RunKey:
    """Ordered by tenant, then run id: the order runs are locked in, so two holders of
    several runs' locks cannot deadlock."""

    tenant_id: str
    run_id: str

    @classmethod
    def of(cls, row) -> RunKey:
        """The key of anything with ``tenant_id`` and ``run_id`` (a row, a call, an intent)."""
        if isinstance(row, dict) or hasattr(row, "keys"):
            return cls(row["tenant_id"], row["run_id"])
        return cls(row.tenant_id, row.run_id)

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.run_id}"


def run_name_sql(*parts: str) -> str:
    """SQL naming a run (with any scope before it) as one text, to hash into an advisory lock
    key: a JSON array, so no separator character in an id can make two pairs the same text
    (``a/b`` + ``c`` against ``a`` + ``b/c``)."""
    return f"jsonb_build_array({', '.join(parts)})::text"
