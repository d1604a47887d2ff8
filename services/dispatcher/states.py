"""Which state a call may move to from which (docs/design.md §4); anything else is refused.

UNKNOWN is reachable only from DISPATCHING or RECONCILING and leaves only through
reconciliation: there is no edge from UNKNOWN to FAILED, so a lost response can never be
recorded as a failure without evidence. MANUAL_REVIEW leaves only through an operator's
resolution, which carries the operator's identity and evidence.
"""

from __future__ import annotations

from shared.contracts.dispatch import CallState as S
from shared.messaging.versioning import INITIAL, Transitions

CALL_TRANSITIONS = Transitions({
    INITIAL: {S.AUTHORIZED},
    S.AUTHORIZED: {S.INTENT_RECORDED, S.DENIED, S.EXPIRED},
    S.INTENT_RECORDED: {S.DISPATCHING, S.DENIED, S.EXPIRED},
    S.DISPATCHING: {S.DISPATCHING, S.SUCCEEDED, S.FAILED, S.UNKNOWN, S.MANUAL_REVIEW, S.DENIED,
                    S.EXPIRED},
    S.UNKNOWN: {S.RECONCILING, S.MANUAL_REVIEW},
    S.RECONCILING: {S.RECONCILING, S.DISPATCHING, S.SUCCEEDED, S.FAILED, S.MANUAL_REVIEW},
    S.MANUAL_REVIEW: {S.SUCCEEDED, S.FAILED},  # only by an operator's resolution, with evidence
    S.SUCCEEDED: {S.COMPENSATING},
    S.COMPENSATING: {S.COMPENSATED, S.COMPENSATION_FAILED},
})

SETTLED = frozenset({S.SUCCEEDED, S.FAILED, S.MANUAL_REVIEW, S.DENIED, S.EXPIRED, S.COMPENSATED,
                     S.COMPENSATION_FAILED})
"""No further step is scheduled for these (COMPENSATING waits for its compensation call)."""

NOT_YET_SENT = frozenset({S.AUTHORIZED, S.INTENT_RECORDED})
