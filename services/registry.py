"""Which PostgreSQL schema each service owns and where its migrations live."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import asyncpg

from shared.config import Settings
from shared.db.migrations import migrate, plan_for
from shared.db.pool import open_pool

_HERE = Path(__file__).parent


@dataclass(frozen=True)
class ServiceSchema:
    schema: str
    migrations: Path | None


SCHEMAS = (
    ServiceSchema("proposal_intake", _HERE / "proposal_intake" / "migrations"),
    ServiceSchema("policy", _HERE / "policy" / "migrations"),
    ServiceSchema("dispatcher", _HERE / "dispatcher" / "migrations"),
    ServiceSchema("wallet", _HERE / "wallet" / "migrations"),
    ServiceSchema("warehouse", _HERE / "warehouse" / "migrations"),
    ServiceSchema("demo", _HERE / "demo" / "migrations"),
    ServiceSchema("projection", _HERE / "projection" / "migrations"),
    ServiceSchema("query", _HERE / "query" / "migrations"),  # after projection: RLS on its tables
)


async def migrate_service(pool: asyncpg.Pool, schema: str) -> list[str]:
    """Services migrate their own schema at start (and ``intentledger migrate`` does all)."""
    spec = next(spec for spec in SCHEMAS if spec.schema == schema)
    async with pool.acquire() as conn:
        return await migrate(conn, spec.schema, plan_for(spec.migrations))


async def migrate_all(settings: Settings) -> dict[str, list[str]]:
    pool = await open_pool(settings.endpoints.database_url, application_name="intentledger-migrate",
                           max_size=1)
    try:
        async with pool.acquire() as conn:
            return {spec.schema: await migrate(conn, spec.schema, plan_for(spec.migrations))
                    for spec in SCHEMAS}
    finally:
        await pool.close()
