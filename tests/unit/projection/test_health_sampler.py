"""The health sampler is beside the projection, never in its way: a failing sample is logged
and the next one is taken; replicas agree on the instant a sample belongs to."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from services.projection.health_sampler import HealthSampler, bucket_of


class Client:
    def __init__(self) -> None:
        self.closed = False

    async def stop(self) -> None:
        self.closed = True

    async def close(self) -> None:
        self.closed = True


async def test_an_unexpected_failure_skips_one_sample_and_the_sampler_goes_on(caplog):
    sampler = HealthSampler(pool=None, bootstrap="unused:9092", every_s=0.01)
    admin, consumer = Client(), Client()
    halt, samples = asyncio.Event(), []

    async def clients():
        return admin, consumer

    async def sample_once(*given):
        samples.append(given)
        if len(samples) == 1:
            raise KeyError("a partition the end offsets did not name")
        halt.set()

    sampler._kafka_clients, sampler.sample_once = clients, sample_once
    await asyncio.wait_for(sampler.run(halt), 5)
    assert samples == [(admin, consumer), (admin, consumer)]
    assert "health sample skipped" in caplog.text
    assert admin.closed and consumer.closed


async def test_kafka_clients_that_cannot_start_are_retried_at_the_next_sample():
    sampler = HealthSampler(pool=None, bootstrap="unused:9092", every_s=0.01)
    halt, attempts = asyncio.Event(), []

    async def clients():
        attempts.append(1)
        if len(attempts) == 3:
            halt.set()
        raise OSError("no broker")

    sampler._kafka_clients = clients
    await asyncio.wait_for(sampler.run(halt), 5)
    assert len(attempts) == 3


def test_replicas_sampling_within_one_interval_name_the_same_instant():
    first = datetime(2026, 11, 30, 13, 0, 1, tzinfo=UTC)
    assert bucket_of(first, 15) == bucket_of(datetime(2026, 11, 30, 13, 0, 14, tzinfo=UTC), 15) == (
        datetime(2026, 11, 30, 13, 0, 0, tzinfo=UTC))
    assert bucket_of(datetime(2026, 11, 30, 13, 0, 15, tzinfo=UTC), 15) != bucket_of(first, 15)
