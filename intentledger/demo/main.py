"""``intentledger demo``: infra up, migrations, every service as a real process, then one event
end to end, an agent's proposals answered, and the crash-after-debit story ending in one debit."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

from intentledger.demo import console as demo_console
from intentledger.demo.authority_act import authority_act
from intentledger.demo.crash_story import (DISPATCHER_FAULTS, DISPATCHER_TUNING, WALLET_FAULTS,
                                           crash_story)
from intentledger.demo.identities import PRINCIPALS, demo_identities, service_env
from intentledger.demo.proposals import propose_act
from shared.db.schemas import migrate_all
from shared import infra
from shared.config import Endpoints, Settings
from shared.db.pool import open_pool
from shared.identity import capability_keys
from shared.db.unit_of_work import UnitOfWork
from shared.messaging.admin import ensure_topics
from shared.messaging.consumer import IdempotentConsumer
from shared.messaging.envelope import Envelope
from shared.messaging.kafka_security import new_broker
from shared.messaging.subscription import subscribe
from shared.messaging.versioning import Advance, Transitions, VersionedTable, advance

TOPIC = "intentledger.demo"
PINGS = VersionedTable("demo", "pings")
TRANSITIONS = Transitions({None: {"sent"}, "sent": {"received"}})


async def run_demo(settings: Settings) -> int:
    endpoints = await asyncio.to_thread(infra.up, settings)
    for schema, applied in (await migrate_all(settings)).items():
        print(f"migrations [{schema}]: {', '.join(applied) or 'up to date'}")
    await ensure_topics(endpoints.kafka_bootstrap, [TOPIC], partitions=4)
    identities = demo_identities(settings)
    signed = service_env(identities)
    print(f"identities: {', '.join(p.principal_id for p in PRINCIPALS)} "
          f"(keys and principals file in {identities.directory})")
    services = [_start_service(name, endpoints, settings, signed)
                for name in ("relay", "proposal-intake", "policy", "projection")]
    services.append(_start_service("wallet", endpoints, settings, signed | WALLET_FAULTS))
    dying = _start_service("dispatcher", endpoints, settings,
                           signed | DISPATCHER_FAULTS | DISPATCHER_TUNING)
    services.append(dying)

    def restart_dispatcher(env: dict[str, str]) -> subprocess.Popen:
        services.append(_start_service("dispatcher", endpoints, settings, signed | env))
        return services[-1][1]

    pool = await open_pool(endpoints.database_url, application_name="intentledger-demo")
    try:
        print("\n== 1. the backbone: state + outbox, relay, idempotent consumer")
        backbone_ok = await _round_trip(pool, endpoints) == 0
        print("\n== 2. an agent proposes a debit: accepted, duplicate, conflict")
        intake_ok = await propose_act(endpoints, identities)
        print("\n== 3. the crash after the debit: committed, answer lost, dispatcher dead")
        story_ok = await crash_story(endpoints, pool, dying[1], restart_dispatcher, identities)
        print("\n== 4. authority at dispatch: a denied agent, a debit two people must approve")
        authority_ok = await authority_act(endpoints, pool, identities)
    finally:
        await pool.close()
        for name, process in services:
            if process.poll() is None:
                process.terminate()
            print(f"{name} stopped (exit {process.wait(30)})")
    ok = backbone_ok and intake_ok and story_ok and authority_ok
    if ok:
        console = await demo_console.start(settings, endpoints)
        print("\nto look around: .venv/bin/intentledger runs list"
              " | runs show <run> --tenant <tenant> | unknown list;"
              "\n               curl -H 'Authorization: Bearer <token>' "
              f"{console.url.removesuffix('/console/')}/v1/runs"
              "\nto break it on purpose: .venv/bin/intentledger chaos run fault-protocols/"
              "  (the shipped crash scenarios; see docs/fault-injection.md)"
              "\nto stop the console, Kafka and PostgreSQL: .venv/bin/intentledger infra down"
              f"\n\nconsole: {console.url}"
              f"\n         sign in with the token {console.token}"
              f" (kept in {settings.home / 'console.json'})")
    print("\ndemo OK" if ok else "\ndemo FAILED")
    return 0 if ok else 1


async def _round_trip(pool, endpoints: Endpoints) -> int:
    run_id = f"demo-{uuid.uuid4().hex[:8]}"
    received = asyncio.Event()

    async def on_ping(uow: UnitOfWork, envelope: Envelope) -> None:
        outcome = await advance(uow.connection, PINGS, envelope.run_id, to_state="received",
                                version=2, transitions=TRANSITIONS)
        print(f"consumer: applied {envelope.event_type} {envelope.event_id} -> {outcome.value}")
        if envelope.run_id == run_id:
            received.set()

    consumer = IdempotentConsumer("demo-receiver", "demo", pool, on_ping)
    broker = new_broker(endpoints.kafka_bootstrap, logger=None)
    subscribe(broker, consumer, TOPIC, group_id="intentledger-demo")
    await broker.start()
    try:
        event = await _send_ping(pool, run_id)
        await asyncio.wait_for(received.wait(), 60)
        print("\nsimulating a relay crash after publish, before mark: the row is pending again")
        await pool.execute("UPDATE demo.outbox SET status = 'pending' WHERE event_id = $1",
                           event.event_id)
        await _wait_until(lambda: consumer.totals.duplicates >= 1, 60)
    finally:
        await broker.stop()
    row = await pool.fetchrow("SELECT state, version FROM demo.pings WHERE id = $1", run_id)
    copies = await pool.fetchval("SELECT count(*) FROM demo.inbox WHERE event_id = $1", event.event_id)
    print(f"\nping {run_id}: state={row['state']} version={row['version']}; "
          f"delivered twice, applied {copies}x, duplicates ignored: {consumer.totals.duplicates}")
    ok = row["state"] == "received" and copies == 1
    print("one event, one effect" if ok else "UNEXPECTED: the event was not applied exactly once")
    return 0 if ok else 1


async def _send_ping(pool, run_id: str) -> Envelope:
    event = Envelope.new(event_type="PingSent", run_id=run_id, producer="demo",
                         payload={"ping": run_id})
    async with UnitOfWork(pool, "demo") as uow:
        outcome = await advance(uow.connection, PINGS, run_id, to_state="sent", version=1,
                                transitions=TRANSITIONS)
        if outcome is not Advance.APPLIED:
            raise RuntimeError(f"ping {run_id} already exists ({outcome.value})")
        uow.emit(TOPIC, event)
        await uow.commit()
    print("committed state + outbox row in one transaction:\n"
          f"{json.dumps(event.model_dump(mode='json'), indent=2)}")
    return event


def _start_service(name: str, endpoints: Endpoints, settings: Settings,
                   extra_env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen]:
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = settings.logs_dir / f"demo-{name}.log"
    env = {**os.environ, **capability_keys.local_environment(settings),
           "INTENTLEDGER_KAFKA_BOOTSTRAP": endpoints.kafka_bootstrap,
           "INTENTLEDGER_DATABASE_URL": endpoints.database_url, **(extra_env or {})}
    env.pop("INTENTLEDGER_HEALTH_PORT", None)  # six services on one host: one port would collide
    process = subprocess.Popen([sys.executable, "-m", "intentledger.cli", "serve", name], env=env,
                               stdout=log_path.open("ab"), stderr=subprocess.STDOUT)
    print(f"{name} started (pid {process.pid}, log {log_path})")
    return name, process


async def _wait_until(predicate, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)
