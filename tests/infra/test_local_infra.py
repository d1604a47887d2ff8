"""The local infrastructure against real processes: a broker from Maven jars, a real PostgreSQL.

Each module run gets its own home and free ports (never the defaults, which a developer's
own `infra up` may hold), and purges everything at the end. The infra functions block, so
async tests call them through ``asyncio.to_thread`` as chaos tests will.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from shared.config import Endpoints, Settings
from shared.infra import class_archive, kafka_local
from shared.infra import down, pause_kafka, resume_kafka, start_kafka, status, stop_kafka, up
from shared.infra.ports import free_port
from shared.infra.processes import is_alive
from shared.infra.readiness import kafka_answers
from shared.messaging.admin import ensure_topics

pytestmark = [pytest.mark.infra, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def settings() -> Iterator[Settings]:
    root = Path(tempfile.mkdtemp(prefix="intentledger-infra-"))
    root.chmod(0o755)  # PostgreSQL runs as user postgres and must reach its data dir
    ports: set[int] = set()
    while len(ports) < 3:
        ports.add(free_port())
    kafka_port, controller_port, postgres_port = sorted(ports)
    configured = Settings(home=root / "home", kafka_bootstrap=None, database_url=None, infra_mode="local",
                          kafka_port=kafka_port, kafka_controller_port=controller_port,
                          postgres_port=postgres_port)
    yield configured
    down(configured, purge=True)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def endpoints(settings: Settings) -> Endpoints:
    return up(settings)


async def test_up_starts_kafka_and_postgres_that_answer(endpoints: Endpoints) -> None:
    topic = await _create_topic(endpoints.kafka_bootstrap)
    await _produce(endpoints.kafka_bootstrap, topic, b"first")

    assert await _consume_all(endpoints.kafka_bootstrap, topic) == [b"first"]
    connection = await asyncpg.connect(endpoints.database_url)
    try:
        assert await connection.fetchval("SELECT 1") == 1
    finally:
        await connection.close()


async def test_second_up_is_a_no_op_with_the_same_endpoints(settings: Settings, endpoints: Endpoints) -> None:
    before = await asyncio.to_thread(status, settings)

    again = await asyncio.to_thread(up, settings)

    after = await asyncio.to_thread(status, settings)
    assert again == endpoints
    assert {name: s["pid"] for name, s in after.items()} == {name: s["pid"] for name, s in before.items()}
    assert Settings(home=settings.home, kafka_bootstrap=None, database_url=None).endpoints == endpoints


async def test_up_given_our_own_endpoints_keeps_them_ours(settings: Settings,
                                                         endpoints: Endpoints) -> None:
    """The endpoints exported from an earlier ``up`` (a shell running the benchmarks) must not
    turn what we started into "external": ``down`` would then leave it running."""
    exported = settings.model_copy(update={"kafka_bootstrap": endpoints.kafka_bootstrap,
                                           "database_url": endpoints.database_url})
    before = await asyncio.to_thread(status, settings)

    assert await asyncio.to_thread(up, exported) == endpoints

    for view in (await asyncio.to_thread(status, settings),
                 await asyncio.to_thread(status, exported)):
        assert {name: (s["mode"], s["pid"]) for name, s in view.items()} == \
            {name: ("local", s["pid"]) for name, s in before.items()}


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
async def test_kafka_restart_keeps_topics_and_records(settings: Settings, endpoints: Endpoints,
                                                      hard: bool) -> None:
    topic = await _create_topic(endpoints.kafka_bootstrap)
    await _produce(endpoints.kafka_bootstrap, topic, b"before restart")

    await asyncio.to_thread(stop_kafka, settings, hard=hard)
    assert (await asyncio.to_thread(status, settings))["kafka"]["alive"] is False
    bootstrap = await asyncio.to_thread(start_kafka, settings)

    assert bootstrap == endpoints.kafka_bootstrap
    assert await _consume_all(bootstrap, topic) == [b"before restart"]


async def test_paused_kafka_stops_answering_until_resumed(settings: Settings, endpoints: Endpoints) -> None:
    await asyncio.to_thread(pause_kafka, settings)
    try:
        assert not await kafka_answers(endpoints.kafka_bootstrap, timeout=2.0)
    finally:
        await asyncio.to_thread(resume_kafka, settings)

    assert await kafka_answers(endpoints.kafka_bootstrap, timeout=10.0)


async def test_down_stops_both_processes(settings: Settings, endpoints: Endpoints) -> None:
    pids = {name: s["pid"] for name, s in (await asyncio.to_thread(status, settings)).items()}
    assert all(pids.values())

    await asyncio.to_thread(down, settings)

    assert not any(is_alive(pid) for pid in pids.values())
    assert not any(s["alive"] for s in (await asyncio.to_thread(status, settings)).values())


async def _create_topic(bootstrap: str) -> str:
    topic = f"infra-test-{uuid.uuid4().hex[:8]}"
    await ensure_topics(bootstrap, [topic], 1)
    return topic


async def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, value, key=b"key")
    finally:
        await producer.stop()


async def _consume_all(bootstrap: str, topic: str) -> list[bytes]:
    """Every record in the topic, read by a fresh consumer group from the beginning."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{uuid.uuid4().hex[:8]}",
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        batches = await consumer.getmany(timeout_ms=15_000, max_records=100)
        return [record.value for records in batches.values() for record in records]
    finally:
        await consumer.stop()


def test_a_kafka_tool_maps_the_class_archive_its_first_run_wrote(settings: Settings, tmp_path) -> None:
    """``class_archive``'s flags on the broker's own JVM and jars: the run that writes the
    archive prints the tool's output alone (the JVM warns of every class it cannot archive, on
    stdout unless told otherwise), a later run maps it (``-Xshare:on`` refuses to start
    otherwise), and an archive of another class path is ignored without a word on stdout."""
    java, libs, tool = kafka_local.java(), kafka_local.ensure_jars(settings), "kafka.admin.ConfigCommand"

    def version(*flags: str, classpath: str = f"{libs}/*") -> subprocess.CompletedProcess:
        return subprocess.run([java, *flags, "-cp", classpath, tool, "--version"],
                              capture_output=True, text=True, timeout=120)

    flags, finish = class_archive.sharing(tmp_path, java, tool)
    first = version(*flags)
    finish(first.returncode == 0)
    assert (first.returncode, first.stdout) == (0, f"{settings.kafka_version}\n"), first.stderr

    later, _ = class_archive.sharing(tmp_path, java, tool)
    assert any(flag.startswith("-XX:SharedArchiveFile=") for flag in later)
    mapped = version(*later, "-Xshare:on")
    assert (mapped.returncode, mapped.stdout) == (0, f"{settings.kafka_version}\n"), mapped.stderr

    elsewhere = version(*later, classpath=f"{tmp_path}:{libs}/*")
    assert (elsewhere.returncode, elsewhere.stdout) == (0, f"{settings.kafka_version}\n")
    assert version(*later, "-Xshare:on", classpath=f"{tmp_path}:{libs}/*").returncode != 0
