"""Helpers the baselines share: scratch Kafka topics, realistic records, quantiles, durability."""

from __future__ import annotations

import contextlib
import statistics
import uuid
from collections.abc import AsyncIterator

import asyncpg
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from shared.db.migrations import migrate, plan_for
from shared.messaging.envelope import Envelope
from shared.messaging.kafka_security import client_options

RUN_KEYS = 200
"""Partition keys cycle over this many runs, as in bench/relay.py."""


def scratch_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@contextlib.asynccontextmanager
async def scratch_topic(bootstrap: str, prefix: str, partitions: int = 8) -> AsyncIterator[str]:
    """A fresh topic (replication 1: the local broker has one), deleted afterwards."""
    topic = scratch_name(f"bench.{prefix}").replace("_", "-")
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
        yield topic
    finally:
        with contextlib.suppress(Exception):
            await admin.delete_topics([topic])
        await admin.close()


def envelope_records(count: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    """(key, value, headers) of ``count`` envelopes shaped like the services' events
    (~270-byte JSON value, 7 headers, keyed by run)."""
    records = []
    for index in range(count):
        run_id = f"run-{index % RUN_KEYS}"
        envelope = Envelope.new(event_type="ProbeSeen", run_id=run_id, producer="bench",
                                payload={"item": run_id, "seq": index})
        records.append((run_id.encode(), envelope.value(),
                        [(name, value.encode()) for name, value in envelope.headers().items()]))
    return records


async def scratch_outbox(conn: asyncpg.Connection, schema: str) -> None:
    """The schema ``schema`` with the services' own messaging tables (their outbox: columns,
    generated shard, indexes and the trigger that NOTIFYs the relay's channel with the schema's
    name), made by the same migrations, so a baseline's commit costs what a service's does."""
    await migrate(conn, schema, plan_for())


def quantile(samples: list[float], q: float) -> float:
    """``q`` in (0, 1]; nearest-rank-style inclusive quantile, NaN without samples."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    if q >= 1 or len(ordered) == 1:
        return ordered[-1]
    return statistics.quantiles(ordered, n=1000, method="inclusive")[round(q * 1000) - 1]


async def require_durable(conn: asyncpg.Connection) -> str:
    """The server's ``synchronous_commit`` (and ``fsync``) must be on: every figure here is
    with full durability. Returns the setting, for the figures."""
    synchronous_commit = await conn.fetchval("SHOW synchronous_commit")
    fsync = await conn.fetchval("SHOW fsync")
    if synchronous_commit != "on" or fsync != "on":
        raise RuntimeError(f"PostgreSQL runs with synchronous_commit={synchronous_commit}, fsync={fsync}: "
                           "baselines are measured with full durability only "
                           "(unset INTENTLEDGER_POSTGRES_FAST and restart PostgreSQL)")
    return synchronous_commit
