"""The Kafka broker stopped for 20 s under load: the relay backs off, retries, loses nothing."""

import asyncio

import pytest

from shared import infra
from shared.db.unit_of_work import UnitOfWork
from shared.messaging.envelope import Envelope
from tests.integration.test_relay_faults import _first_seen_sequence_per_key
from tests.support.kafka import copies_per_event, create_topic, read_topic, unique_topic, wait_for
from tests.support.probe import Probe
from tests.support.processes import ServiceProcess, relay_env

pytestmark = pytest.mark.infra


async def test_broker_stopped_for_20_seconds_under_load_loses_nothing(
        pool, endpoints, infra_settings, tmp_path):
    if infra_settings is None:
        pytest.skip("the broker is external (INTENTLEDGER_KAFKA_BOOTSTRAP): cannot stop it")
    topic = unique_topic()
    await create_topic(endpoints.kafka_bootstrap, topic, partitions=4)
    probe = await Probe(pool, topic).create()
    keys = [f"run-{i}" for i in range(10)]
    relay = ServiceProcess("relay", endpoints, tmp_path / "relay.log",
                           env=relay_env(probe.schema, batch_size=50)).start()
    stop_writing = asyncio.Event()
    writing = asyncio.create_task(_write_steadily(probe, keys, stop_writing))
    try:
        await asyncio.sleep(3)
        await asyncio.to_thread(infra.stop_kafka, infra_settings)
        await asyncio.sleep(20)
        status = await probe.outbox_status()
        assert status.get("pending", 0) > 0, status  # the outage was felt: work piled up
        await asyncio.to_thread(infra.start_kafka, infra_settings)
        await asyncio.sleep(3)
        stop_writing.set()
        written = await writing
        assert await wait_for(lambda: _all_published(probe, written), timeout=120), \
            await probe.outbox_status()
        assert relay.process.poll() is None, "the relay must survive the outage"
    finally:
        writing.cancel()
        relay.stop()

    records = await read_topic(endpoints.kafka_bootstrap, topic, until=written, timeout=60)
    assert len(set(copies_per_event(records))) == written
    per_key = _first_seen_sequence_per_key(records)
    assert all(sequence == sorted(sequence) for sequence in per_key.values())
    assert sum(len(sequence) for sequence in per_key.values()) == written


async def _write_steadily(probe: Probe, keys: list[str], stop: asyncio.Event) -> int:
    """About 100 events a second, each key's events with increasing seq, until ``stop``. Told
    to stop, not cancelled: a cancel landing in a COMMIT the server completes anyway would
    leave rows this count does not know of."""
    written, seq = 0, 0
    while not stop.is_set():
        seq += 1
        await _emit_round(probe, keys, seq)
        written += len(keys)
        await asyncio.sleep(0.1)
    return written


async def _emit_round(probe: Probe, keys: list[str], seq: int) -> None:
    async with UnitOfWork(probe.pool, probe.schema) as uow:
        for key in keys:
            uow.emit(probe.topic, Envelope.new(event_type="ProbeSeen", run_id=key, producer="probe",
                                               payload={"item": key, "seq": seq}))
        await uow.commit()


async def _all_published(probe: Probe, written: int) -> bool:
    return await probe.outbox_status() == {"published": written}
