"""Named retry policies: one definition each, used by name across services.

Backoff is exponential with full jitter so that replicas recovering from the same outage do
not hammer the dependency in lockstep.
"""

from __future__ import annotations

import asyncio

from tenacity import (AsyncRetrying, retry_if_exception, stop_after_delay, stop_never,
                      stop_when_event_set)
from tenacity.wait import wait_random_exponential

from shared.errors import is_retryable


STARTUP_PATIENCE_S = 120.0
"""How long a starting service waits for Kafka and PostgreSQL (pods start in any order)."""


def dependency_backoff(*, give_up_after_s: float | None = None,
                       stopping: asyncio.Event | None = None) -> AsyncRetrying:
    """Retry transient Kafka/PostgreSQL failures; re-raise anything permanent at once, and
    the last failure when time is up or ``stopping`` is set (a SIGTERM during start-up)."""
    stop = stop_after_delay(give_up_after_s) if give_up_after_s else stop_never
    if stopping is not None:
        stop = stop | stop_when_event_set(stopping)
    return AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        wait=wait_random_exponential(multiplier=0.1, max=5.0),
        stop=stop,
        reraise=True,
    )


def backoff_delay(attempt: int) -> float:
    """The same jittered curve as ``dependency_backoff``, for loops that must not stop."""
    return wait_random_exponential(multiplier=0.1, max=5.0)(_State(attempt))


class _State:
    """The slice of tenacity's RetryCallState that its wait strategies read."""

    def __init__(self, attempt: int) -> None:
        self.attempt_number = attempt
