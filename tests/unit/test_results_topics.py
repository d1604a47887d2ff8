"""Each tenant's answers on a topic of its own: names no tenant id can make illegal or shared,
and the one partition an agent reads is the one the relay writes its run's answers to."""

from __future__ import annotations

import pytest
from aiokafka.partitioner import murmur2

from services.relay.publisher import new_producer
from shared.contracts.tenants import is_tenant_id
from intentledger_client.topics import partition_for
from shared.topology import AGENT_RESULTS, BY_NAME, results_topic, results_topics

ILLEGAL = ["acme.eu", "acme_eu", "Acme", "", "-acme", "acme-", "a" * 64, "acme eu", "acmé",
           "acme\n", "..", "acme/eu", "*", 7, None]


def test_a_tenants_answers_have_a_topic_of_their_own():
    assert results_topic("acme") == "agent.results.acme"
    assert results_topic("acme-retail", "agent.results.t1") == "agent.results.t1.acme-retail"
    assert BY_NAME[AGENT_RESULTS].per_tenant
    assert BY_NAME[AGENT_RESULTS].address == "agent.results.{tenant}"


@pytest.mark.parametrize("tenant", ILLEGAL)
def test_a_tenant_id_that_could_make_an_illegal_or_shared_topic_is_refused(tenant):
    assert not is_tenant_id(tenant)
    with pytest.raises(ValueError, match="not a tenant id"):
        results_topic(tenant)


def test_the_longest_tenant_id_still_makes_a_legal_topic_name():
    topic = results_topic("a" * 63)
    assert len(topic) <= 249  # Kafka's limit


def test_the_family_pattern_finds_every_tenants_topic_and_nothing_else():
    pattern = results_topics()
    assert pattern.match("agent.results.acme").group(1) == "acme"
    assert pattern.match("agent.results.globex-2").group(1) == "globex-2"
    for other in ("agent.results", "agent.results.", "agent.proposals", "agent_results.acme",
                  "agent.resultsX.acme", "agent.results.t1.acme", "agent.results.Acme",
                  "agent.results.acme_eu", "xagent.results.acme"):
        assert pattern.match(other) is None, other


@pytest.mark.parametrize("text, expected", [
    # Kafka's own test vectors (clients' UtilsTest.testMurmur2): the Java producer's partitioner
    ("21", -973932308), ("foobar", -790332482), ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971), ("abc", 479470107)])
def test_the_partitioner_is_kafkas_murmur2_as_every_other_client_computes_it(text, expected):
    assert _signed(murmur2(text.encode())) == expected
    assert partition_for(text.encode(), range(4)) == (expected & 0x7FFFFFFF) % 4


async def test_the_relays_producer_keeps_the_default_partitioner_the_agent_reads_by():
    """The relay places its batches with ``partition_for``; a plain ``send`` would agree too."""
    producer = new_producer("localhost:1", 900_000)
    keys = [f"run-{n}".encode() for n in range(200)]
    assert [producer._partitioner(key, [0, 1, 2, 3], [0, 1, 2, 3]) for key in keys] == \
        [partition_for(key, [3, 1, 0, 2]) for key in keys]  # in whatever order metadata lists them
    assert len({partition_for(key, range(4)) for key in keys}) == 4


def _signed(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value
