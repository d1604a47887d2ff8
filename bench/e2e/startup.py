"""Bringing the system under test to a known start: the durability it runs with on record, this
run's wallets opened, every service started (relay first), and anything left in flight by an
earlier run noted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg

from bench.e2e.config import Config
from bench.e2e.pipeline import MOVING, SERVICES, service_env
from bench.e2e.tenancy import principal_of
from intentledger.chaos.stack import Stack
from downstreams.wallet.repository import open_wallet
from shared.config import Settings
from shared.identity.local import DISPATCHER, Identity, LocalIdentities

OPENING_BALANCE_MINOR = 10**13
"""Every wallet of the run opens with this much: no debit is refused for want of funds."""


async def durability(pool: asyncpg.Pool) -> dict[str, Any]:
    """PostgreSQL's durability settings and the producers' acknowledgements, for the result."""
    async with pool.acquire() as conn:
        settings = {name: await conn.fetchval(f"SHOW {name}")
                    for name in ("synchronous_commit", "fsync", "full_page_writes",
                                 "wal_level", "shared_buffers", "max_connections")}
    return {"postgres": settings, "relay_producer": {"acks": "all", "enable_idempotence": True,
                                                     "linger_ms": 5},
            "load_producer": {"acks": "all", "enable_idempotence": True}}


async def seed_wallets(pool: asyncpg.Pool, wallet_ids: list[str]) -> None:
    semaphore = asyncio.Semaphore(4)

    async def one(wallet_id: str) -> None:
        async with semaphore:
            if not await open_wallet(pool, wallet_id, "EUR", OPENING_BALANCE_MINOR):
                raise RuntimeError(f"wallet {wallet_id} exists already")

    await asyncio.gather(*(one(w) for w in wallet_ids))


async def leftovers(pool: asyncpg.Pool) -> str | None:
    """A warning when calls of earlier runs are still in flight (this run's dispatcher will
    step them too)."""
    in_flight = await pool.fetchval(
        "SELECT count(*) FROM dispatcher.calls WHERE state = ANY($1::text[])", list(MOVING))
    if in_flight:
        return (f"{in_flight} calls of earlier runs were in flight at the start; this run's "
                "dispatcher steps them too")
    return None


def identities(settings: Settings, tenants: list[str]) -> LocalIdentities:
    """Each tenant's principal, signing every proposal of its tenant as a deployed agent does
    (signing and verifying are part of what is measured), and the dispatcher's, which seals
    compensations."""
    local = LocalIdentities(settings.home / "identity" / "bench")
    local.ensure([*(Identity(principal_of(t), (t,)) for t in tenants), DISPATCHER])
    return local


async def start_services(stack: Stack, config: Config, identities: LocalIdentities,
                         tenants: list[str], policy: Path) -> None:
    """Every service, then the extra replicas ``--replicas`` asks for."""
    def env(service: str) -> dict[str, str]:
        unsigned = {"INTENTLEDGER_INTAKE_UNSIGNED_TENANTS": json.dumps(tenants)} \
            if config.unsigned and service == "proposal-intake" else {}
        return service_env(service, config.env, identities, policy) | unsigned

    # The relay first: the others' start-up (topics, migrations) needs nothing from it, but
    # starting six Python processes at once on two cores only makes each slower.
    await stack.start("relay", env("relay"))
    await asyncio.gather(*(stack.start(service, env(service)) for service in SERVICES[1:]))
    for service, count in config.replicas.items():
        for _ in range(count - 1):
            await stack.start(service, env(service))
