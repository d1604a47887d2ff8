"""Which PostgreSQL schema each service owns and where its migrations live."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from shared.config import Settings
from shared.db.migrations import migrate, plan_for
from shared.db.pool import open_pool

_HERE = Path(__file__).parent


@dataclass(frozen=True)
class ServiceSchema:
    schema: str
    migrations: Path | None


SCHEMAS = (
    ServiceSchema("demo", _HERE / "demo" / "migrations"),
)


async def migrate_all(settings: Settings) -> dict[str, list[str]]:
    pool = await open_pool(settings.endpoints.database_url, application_name="intentledger-migrate",
                           max_size=1)
    try:
        async with pool.acquire() as conn:
            return {spec.schema: await migrate(conn, spec.schema, plan_for(spec.migrations))
                    for spec in SCHEMAS}
    finally:
        await pool.close()
