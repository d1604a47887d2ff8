"""Where a run's answers are: its tenant's topic, and the partition Kafka's default
partitioner puts its run id in (what every Kafka client, and the relay, computes)."""

from __future__ import annotations

import pytest

from intentledger_client.topics import partition_for, results_topic


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), written out here so the
    test does not check aiokafka against itself."""
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ len(data)) & 0xFFFFFFFF
    for i in range(0, len(data) - len(data) % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[len(data) - len(data) % 4:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


@pytest.mark.parametrize("run", ["run-1", "demo-run-3f2a", "r", "ünïcode-run", "x" * 37])
def test_a_run_goes_to_the_partition_javas_default_partitioner_picks(run: str) -> None:
    key = run.encode()
    assert partition_for(key, [3, 0, 2, 1]) == (murmur2(key) & 0x7FFFFFFF) % 4


@pytest.mark.parametrize("tenant", ["Acme", "acme.eu", "a_b", "", "-acme", "a" * 64])
def test_a_tenant_id_that_is_no_dns_label_names_no_topic(tenant: str) -> None:
    with pytest.raises(ValueError):
        results_topic(tenant)


def test_a_tenants_topic_is_the_familys_name_and_the_tenant() -> None:
    assert results_topic("acme") == "agent.results.acme"
    assert results_topic("acme", "staging.results") == "staging.results.acme"
