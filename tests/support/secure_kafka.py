"""The authorizing broker of the tests that prove tenant isolation: ``infra up --secure`` in a
home of its own (``<test home>/secure``), so it never disturbs the session's plain broker, with
its own PostgreSQL for the end-to-end run. Started only by the tests that ask for it
(the ``secure_kafka`` fixture), stopped at the end of the session.

Its users are those of ``intentledger infra up --secure`` (``intentledger.secure_kafka``) for
the tenants the session's principals act for: ``acme`` (agent-7) and ``globex``
(globex-agent)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from intentledger import secure_kafka
from intentledger.cli import SERVED
from shared import topology
from shared.config import Endpoints, Settings
from shared.infra import kafka_credentials, kafka_local
from shared.infra.kafka_credentials import ADMIN, Credentials
from shared.infra.kafka_secure import SecurePlan
from shared.infra.kafka_tools import Tools

TENANTS = ("acme", "globex")


@dataclass(frozen=True)
class SecureKafka:
    settings: Settings
    endpoints: Endpoints
    plan: SecurePlan
    credentials: Credentials

    @property
    def bootstrap(self) -> str:
        return self.endpoints.kafka_bootstrap

    def login(self, user: str, password: str | None = None) -> dict[str, Any]:
        """aiokafka's arguments to connect as ``user`` (with another ``password``: a forgery)."""
        kwargs = {"bootstrap_servers": self.bootstrap, **self.credentials.client_kwargs(user)}
        if password is not None:
            kwargs["sasl_plain_password"] = password
        return kwargs

    def env(self, user: str) -> dict[str, str]:
        """A service process's settings to log in as ``user`` (its env file's content)."""
        return self.credentials.env(user, self.bootstrap)

    def tools(self) -> Tools:
        """Kafka's own tools, as the admin: what the broker really holds."""
        return Tools(kafka_local.java(), kafka_local.ensure_jars(self.settings),
                     self.settings.home.resolve(), self.bootstrap, kafka_local.LOG4J2)

    @asynccontextmanager
    async def producer(self, user: str = ADMIN, **options: Any):
        producer = AIOKafkaProducer(**self.login(user), **options)
        await producer.start()
        try:
            yield producer
        finally:
            await producer.stop()

    async def read(self, topic: str, user: str = ADMIN, *, until: Callable[[list], bool],
                   timeout_s: float = 10.0) -> list:
        """The records of ``topic`` read as ``user`` without a consumer group (as agents read),
        from the start, until ``until(records)`` or the timeout."""
        consumer = AIOKafkaConsumer(**self.login(user), group_id=None,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        records: list = []
        try:
            family = topology.results_topics().match(topic)
            partitions = topology.RESULTS_PARTITIONS if family else self.plan.partitions
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            deadline = time.monotonic() + timeout_s
            while not until(records) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                records += [record for batch in batches.values() for record in batch]
            return records
        finally:
            await consumer.stop()


def start(test_home: Path) -> SecureKafka:
    from shared import infra

    settings = Settings(home=test_home / "secure", kafka_port=0, kafka_controller_port=0,
                        postgres_port=0, infra_mode="local", kafka_bootstrap=None,
                        database_url=None)
    plan = secure_kafka.plan(SERVED, TENANTS)
    endpoints = infra.up(settings, secure=plan)
    return SecureKafka(settings, endpoints, plan, kafka_credentials.load(settings.home.resolve()))


async def refused(consumer: AIOKafkaConsumer, *errors: type[Exception]) -> None:
    """The broker refuses ``consumer`` with one of ``errors``: at start (the topic's metadata)
    or at its first fetch or group join."""
    try:
        with pytest.raises(errors):
            await consumer.start()
            await consumer.getmany(timeout_ms=5000)
    finally:
        await consumer.stop()
