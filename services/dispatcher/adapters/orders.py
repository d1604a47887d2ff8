"""What an adapter is asked to do (an ``Order``) and what it may answer (an ``Outcome``).

An adapter never retries and never decides: it performs one attempt and classifies what it
saw. The dispatcher is the only retry owner (DESIGN.md §5.6), so client libraries' own retries
are turned off inside adapters.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from shared.tools import ToolSpec

OutcomeStatus = Literal["applied", "rejected", "not_found", "stale", "transient", "unknown"]
"""
- ``applied``: confirmed, the effect exists (``replayed`` if an earlier request made it);
- ``rejected``: confirmed, nothing was applied (``reason`` says why), terminal;
- ``not_found``: a lookup's answer: the key was never settled downstream;
- ``stale``: the downstream refused our fence: another worker owns the run now;
- ``transient``: confirmed nothing applied, may be retried (connection refused, or a 5xx
  the tool's contract declares ``not_applied``);
- ``unknown``: the request may or may not have taken effect (timeout, reset after sending,
  5xx under an ``unknown`` contract): reconcile, never assume failure.
"""


@dataclass(frozen=True)
class Order:
    kind: Literal["send", "lookup"]
    tool: ToolSpec
    run_id: str
    logical_call_id: uuid.UUID
    operation_key: str
    canonical_arguments: dict[str, Any]
    attempt: int
    fence: int
    deadline_at: datetime
    """Absolute end of this attempt: min(per-attempt cap, run deadline - recovery reserve)."""


@dataclass(frozen=True)
class Outcome:
    status: OutcomeStatus
    detail: str
    """For the audit: "HTTP 503", "timeout after 2.0 s", "connection reset", ..."""
    result: dict[str, Any] | None = None
    reason: str | None = None
    receipt_id: str | None = None
    replayed: bool = False
