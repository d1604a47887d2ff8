"""A batch's count of a bounded tool's slots, as its steps send and wait (``capacity.py``):
what decides, within one transaction, which sends go and which wait in line."""

from __future__ import annotations

from services.dispatcher.capacity import Capacity, bounds_of


def test_a_batch_of_new_sends_fills_the_free_slots_and_the_rest_wait_in_line():
    capacity = Capacity({"wallet.debit": 2})
    capacity.in_use["wallet.debit"] = 1
    went = []
    for call in range(5):
        if capacity.admits("wallet.debit", None):
            capacity.sent("wallet.debit", None)
            went.append(call)
        else:
            capacity.waits("wallet.debit", None)
    assert went == [0]
    assert (capacity.in_use["wallet.debit"], capacity.in_line["wallet.debit"]) == (2, 4)
    assert capacity.with_line() == {"wallet.debit": 2}


def test_a_call_in_line_counts_once_while_it_waits_and_takes_a_slot_when_it_leaves():
    capacity = Capacity({"wallet.debit": 2})
    capacity.in_line["wallet.debit"] = 2
    capacity.waits("wallet.debit", "waiting")  # still in line: one place, not two
    assert capacity.in_line["wallet.debit"] == 2
    assert not capacity.admits("wallet.debit", None)  # others are in line before it
    assert capacity.admits("wallet.debit", "waiting")
    capacity.sent("wallet.debit", "waiting")
    assert (capacity.in_use["wallet.debit"], capacity.in_line["wallet.debit"]) == (1, 1)


def test_an_admitted_call_uses_the_slot_already_counted_for_it():
    capacity = Capacity({"wallet.debit": 1})
    capacity.in_use["wallet.debit"] = 1  # the slot kept for the admitted call
    assert capacity.admits("wallet.debit", "admitted")
    capacity.sent("wallet.debit", "admitted")
    assert capacity.in_use["wallet.debit"] == 1
    assert not capacity.admits("wallet.debit", "waiting")


def test_an_unbounded_tool_always_sends_and_is_never_counted():
    capacity = Capacity(bounds_of([("wallet.debit", None), ("wallet.refund", 4)]))
    assert capacity.bounds == {"wallet.refund": 4}
    assert capacity.admits("wallet.debit", None)
    capacity.sent("wallet.debit", None)
    assert capacity.in_use["wallet.debit"] == 0 and capacity.with_line() == {}
