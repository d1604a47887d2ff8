"""Every kind of timed fault a protocol may name has something that applies it: a kind added to
the protocol's schema without an entry in the routing table would be a scenario that never
fires its fault."""

from typing import get_args

from intentledger.chaos.timed import APPLY
from shared.contracts.fault_protocol import Timed


def test_every_timed_fault_kind_is_routed_and_nothing_else():
    assert set(APPLY) == set(get_args(Timed))
