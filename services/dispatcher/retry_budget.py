"""The dispatcher's retry arithmetic: one absolute deadline, an attempt budget, jittered backoff.

The decision to retry is durable (the call's ``next_action_at``), not an in-memory loop, so it
survives a crash; tenacity supplies the backoff curve and the stop rule, evaluated against the
attempt number recorded in the database.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tenacity import stop_after_attempt
from tenacity.wait import wait_random_exponential

_BACKOFF = wait_random_exponential(multiplier=0.2, max=10.0)


class _Attempted:
    """The slice of tenacity's RetryCallState its wait and stop strategies read."""

    def __init__(self, attempt_number: int) -> None:
        self.attempt_number = attempt_number
        self.seconds_since_start = None
        self.outcome_timestamp = None
        self.start_time = None


def attempt_deadline(now: datetime, per_attempt_cap_s: float, run_deadline: datetime,
                     recovery_reserve_s: float) -> datetime:
    """``min(per_attempt_cap, run_deadline - now - recovery_reserve)`` as an instant: a relative
    timeout that restarted on every attempt would stretch the run's promise (docs/design.md §5.6)."""
    return min(now + timedelta(seconds=per_attempt_cap_s),
               run_deadline - timedelta(seconds=recovery_reserve_s))


def attempts_exhausted(sent: int, max_attempts: int) -> bool:
    return stop_after_attempt(max_attempts)(_Attempted(sent))


def backoff(attempt_number: int) -> timedelta:
    """Exponential with full jitter, so replicas recovering together do not retry in step."""
    return timedelta(seconds=_BACKOFF(_Attempted(attempt_number)))
