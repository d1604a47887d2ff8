"""The legality gate in front of compare-and-swap, and the identifiers it interpolates."""

from __future__ import annotations

import pytest

from shared.messaging.versioning import INITIAL, Transitions, VersionedTable

PING = Transitions({
    INITIAL: ["sent"],
    "sent": ["received", "sent"],
    "received": ["acknowledged"],
    "failed": ["sent"],
})


def test_a_first_event_may_only_enter_an_initial_state():
    assert PING.permits(INITIAL, "sent")
    assert not PING.permits(INITIAL, "received")


def test_a_listed_transition_is_permitted():
    assert PING.permits("sent", "received")
    assert PING.permits("received", "acknowledged")


def test_an_unlisted_transition_is_forbidden():
    assert not PING.permits("received", "sent")
    assert not PING.permits("acknowledged", "sent")


def test_a_self_loop_is_permitted_only_when_listed():
    assert PING.permits("sent", "sent")
    assert not PING.permits("received", "received")


def test_an_unknown_state_permits_nothing():
    assert not PING.permits("archived", "sent")


def test_predecessors_are_every_state_that_may_lead_to_the_target():
    assert sorted(PING.predecessors("sent")) == ["failed", "sent"]
    assert PING.predecessors("acknowledged") == ["received"]


def test_the_initial_pseudo_state_is_never_a_predecessor():
    """It is not a value of the state column, so the CAS must not look for it there."""
    assert None not in PING.predecessors("sent")


def test_a_state_nothing_leads_to_has_no_predecessors():
    assert PING.predecessors("failed") == []


def test_a_versioned_table_quotes_its_checked_names():
    table = VersionedTable("demo", "pings", key_column="ping_id")
    assert table.qualified == '"demo"."pings"'


@pytest.mark.parametrize("names", [
    ("Demo", "pings", "id"),
    ("demo", 'pings"; DROP TABLE x; --', "id"),
    ("demo", "pings", "id = id OR true"),
    ("demo", "", "id"),
    ("1demo", "pings", "id"),
    ("demo", "p" * 64, "id"),
])
def test_a_versioned_table_refuses_names_that_are_not_plain_identifiers(names):
    with pytest.raises(ValueError):
        VersionedTable(*names)
