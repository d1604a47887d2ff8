"""Which PostgreSQL schema each component owns and where its migrations live.

The database's side of the topology (``shared/topology.py`` is Kafka's): one row per schema,
in the order ``intentledger migrate`` applies them. Services find their own folder here by
path, never by importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import asyncpg

from shared.config import Settings
from shared.db.migrations import Migration, migrate, pending, plan_for
from shared.db.pool import open_pool
from shared.health import NotReady

_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ServiceSchema:
    schema: str
    migrations: Path | None


SCHEMAS = (
    ServiceSchema("proposal_intake", _ROOT / "services" / "proposal_intake" / "migrations"),
    ServiceSchema("policy", _ROOT / "services" / "policy" / "migrations"),
    ServiceSchema("dispatcher", _ROOT / "services" / "dispatcher" / "migrations"),
    ServiceSchema("wallet", _ROOT / "downstreams" / "wallet" / "migrations"),
    ServiceSchema("warehouse", _ROOT / "downstreams" / "warehouse" / "migrations"),
    ServiceSchema("demo", _ROOT / "intentledger" / "demo" / "migrations"),
    ServiceSchema("projection", _ROOT / "services" / "projection" / "migrations"),
    # after projection: RLS on its tables
    ServiceSchema("query", _ROOT / "services" / "query" / "migrations"),
)


async def migrate_service(pool: asyncpg.Pool, schema: str) -> list[str]:
    """Services migrate their own schema at start (and ``intentledger migrate`` does all)."""
    async with pool.acquire() as conn:
        return await migrate(conn, schema, _plan(_folder(schema)))


async def expect_migrated(pool: asyncpg.Pool, *schemas: str, messaging_only: bool = False) -> None:
    """Readiness: every migration this release has for each schema is applied (only the shared
    messaging tables' for the relay, which drains outboxes it does not own)."""
    async with pool.acquire() as conn:
        for schema in schemas:
            plan = _plan(None if messaging_only else _folder(schema))
            if missing := await pending(conn, schema, plan):
                raise NotReady(f"{schema} lacks migrations {', '.join(missing)}")


def _folder(schema: str) -> Path | None:
    return next(spec.migrations for spec in SCHEMAS if spec.schema == schema)


@cache
def _plan(folder: Path | None) -> list[Migration]:
    """Read once per process: the files are part of the release."""
    return plan_for(folder)


async def migrate_all(settings: Settings) -> dict[str, list[str]]:
    pool = await open_pool(settings.endpoints.database_url, application_name="intentledger-migrate",
                           max_size=1)
    try:
        async with pool.acquire() as conn:
            return {spec.schema: await migrate(conn, spec.schema, _plan(spec.migrations))
                    for spec in SCHEMAS}
    finally:
        await pool.close()
