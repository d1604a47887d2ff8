"""What an adapter is asked to do (an ``Order``) and what it may answer (an ``Outcome``).

An adapter never retries and never decides: it performs one attempt and classifies what it
saw. The dispatcher is the only retry owner (docs/design.md §5.6), so client libraries' own retries
are turned off inside adapters.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from shared.tools import ToolSpec

OutcomeStatus = Literal["applied", "rejected", "not_found", "stale", "transient", "refused",
                        "unknown"]
"""
- ``applied``: confirmed, the effect exists (``replayed`` if an earlier request made it);
- ``rejected``: the downstream's receipt: nothing was applied (``reason`` says why), terminal;
- ``not_found``: the downstream's receipt to a lookup: the key was never settled there;
- ``stale``: the downstream's receipt: it has seen a newer fence for this run;
- ``transient``: confirmed nothing applied, may be retried (connection refused, or a 5xx
  the tool's contract declares ``not_applied``);
- ``refused``: a 4xx without the downstream's receipt (a gateway, a router, a malformed
  request): this request was refused, but it says nothing of what earlier ones came to;
- ``unknown``: the request may or may not have taken effect (timeout, reset after sending,
  5xx under an ``unknown`` contract): reconcile, never assume failure.
"""


@dataclass(frozen=True)
class Order:
    kind: Literal["send", "lookup"]
    tool: ToolSpec
    run_id: str
    tenant_id: str
    """With the run id, the run the fence belongs to (a downstream remembers fences per pair)."""
    logical_call_id: uuid.UUID
    operation_key: str
    canonical_arguments: dict[str, Any]
    attempt: int
    fence: int
    deadline_at: datetime
    """Absolute end of this attempt: min(per-attempt cap, run deadline - recovery reserve)."""
    capability: dict[str, Any] | None = None
    """The policy's signed capability, passed on so the downstream can check it too; none on
    a compensation or a lookup."""


@dataclass(frozen=True)
class Outcome:
    status: OutcomeStatus
    detail: str
    """For the audit: "HTTP 503", "timeout after 2.0 s", "connection reset", ..."""
    result: dict[str, Any] | None = None
    reason: str | None = None
    receipt_id: str | None = None
    replayed: bool = False
    settled_by_attempt: int | None = None
    """For a replayed answer, the attempt that applied the effect (the receipt says)."""
