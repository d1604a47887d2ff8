"""The benchmark's client phase: a client call is timed from its publish to the outcome it
returned, and one that returned pending or another status than its call's is a failure."""

import math

from bench.e2e.correctness import told_otherwise
from bench.e2e.proposals import Proposals


def _published(n: int) -> Proposals:
    proposals = Proposals()
    for _ in range(n):
        proposals.published(0)
    return proposals


def test_a_client_call_is_timed_to_the_outcome_it_returned():
    proposals = _published(2)
    proposals.t_returned[0] = proposals.t_pub[0] + 0.042
    assert math.isclose(proposals.client_ms(0), 42.0, abs_tol=1e-3)
    assert math.isnan(proposals.client_ms(1))  # a raw proposal has no client outcome


def test_pending_or_another_status_than_the_calls_is_told_otherwise():
    proposals = _published(4)
    proposals.status[:] = ["SUCCEEDED", "SUCCEEDED", "FAILED", "SUCCEEDED"]
    proposals.client_status.update({0: "succeeded", 1: "pending", 2: "succeeded", 3: "failed"})
    assert told_otherwise(proposals) == [1, 2, 3]


def test_raw_proposals_are_not_the_clients_to_answer():
    proposals = _published(2)
    proposals.status[:] = ["SUCCEEDED", None]
    assert told_otherwise(proposals) == []
