"""The benchmark counts lag in every consumer group of the services it runs: a group it does not
know of is work it cannot see waiting, and topics it files under the wrong group count as lag
that never drains (the dispatcher's receipts, once they moved to a lane of their own)."""

from bench.e2e.pipeline import GROUP_TOPICS, SERVICES
from shared.messaging.consumer_service import CONSUMER_GROUPS, priority_group


def test_the_benchmark_watches_every_group_of_the_services_it_runs():
    expected = {group for service in SERVICES for group in CONSUMER_GROUPS.get(service, ())}
    assert set(GROUP_TOPICS) == expected


def test_the_dispatchers_receipts_are_counted_in_its_priority_lane():
    assert "effects.receipts" in GROUP_TOPICS[priority_group("dispatcher")]
    assert "effects.receipts" not in GROUP_TOPICS["dispatcher"]
