"""A relay facing an unreachable broker neither holds its transaction nor refuses to stop."""

import asyncio
import time

import pytest

from shared import infra
from tests.support.kafka import create_topic, unique_topic, wait_for
from tests.support.probe import Probe
from tests.support.relay import running_relay

pytestmark = pytest.mark.infra


async def test_a_paused_broker_ends_the_publish_transaction_and_lets_the_relay_stop(
        pool, endpoints, infra_settings):
    if infra_settings is None:
        pytest.skip("the broker is external (INTENTLEDGER_KAFKA_BOOTSTRAP): cannot pause it")
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic)
    probe = await Probe(pool, topic).create()
    relay = running_relay(endpoints, probe.schema, publish_timeout_s=2, shutdown_grace_s=3)
    await relay.__aenter__()
    await probe.emit(["warm-up"], per_key=1)
    assert await wait_for(lambda: _published(probe, 1), timeout=30)  # the relay is connected
    await asyncio.to_thread(infra.pause_kafka, infra_settings)
    try:
        await probe.emit(["k"], per_key=3)
        await asyncio.sleep(6)  # several publish timeouts
        stuck = await pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'intentledger-relay' "
            "AND state = 'idle in transaction' AND now() - xact_start > interval '4 seconds'")
        assert stuck == 0, "no transaction outlives the publish timeout"
        began = time.monotonic()
        await relay.__aexit__(None, None, None)
        assert time.monotonic() - began < 20, "the relay stops while the broker is unreachable"
    finally:
        await asyncio.to_thread(infra.resume_kafka, infra_settings)
    async with running_relay(endpoints, probe.schema):
        assert await wait_for(lambda: _published(probe, 4), timeout=60)


async def _published(probe: Probe, n: int) -> bool:
    return (await probe.outbox_status()).get("published", 0) == n
