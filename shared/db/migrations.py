"""Forward-only, versioned SQL migrations: one PostgreSQL schema per service.

A service's migrations are the shared messaging files (outbox, inbox, dead letters) followed
by its own, applied in order with ``search_path`` set to the service schema, so the SQL names
its tables unqualified. Each applied file is recorded with a checksum; an edited file that was
already applied is refused instead of silently diverging. A transaction-level advisory lock
lets every replica call ``migrate`` at start-up without racing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from shared.db.identifiers import checked_identifier

MESSAGING_MIGRATIONS = Path(__file__).with_name("migrations") / "messaging"


@dataclass(frozen=True)
class Migration:
    version: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load(source: str, folder: Path) -> list[Migration]:
    """Files named ``NNNN_description.sql``, versioned as ``source/NNNN_description``."""
    return [Migration(f"{source}/{path.stem}", path.read_text(encoding="utf-8"))
            for path in sorted(folder.glob("[0-9][0-9][0-9][0-9]_*.sql"))]


def plan_for(service_folder: Path | None = None) -> list[Migration]:
    plan = load("messaging", MESSAGING_MIGRATIONS)
    if service_folder is not None:
        plan += load("service", service_folder)
    return plan


async def migrate(conn: asyncpg.Connection, schema: str, plan: list[Migration]) -> list[str]:
    """Apply what is missing; return the versions applied now."""
    schema = checked_identifier(schema)
    applied_now: list[str] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('intentledger.migrate'))")
        await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await conn.execute(f'SET LOCAL search_path TO "{schema}"')
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version text PRIMARY KEY, checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = dict(await conn.fetch("SELECT version, checksum FROM schema_migrations"))
        for migration in plan:
            if migration.version in done:
                if done[migration.version] != migration.checksum:
                    raise RuntimeError(
                        f"{schema}: migration {migration.version} was edited after it was applied"
                    )
                continue
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)",
                migration.version, migration.checksum,
            )
            applied_now.append(migration.version)
    return applied_now


async def pending(conn: asyncpg.Connection, schema: str, plan: list[Migration]) -> list[str]:
    """Versions of ``plan`` not applied in ``schema`` (all of them before its first migration):
    readiness, so that a pod of a newer release never serves on an older schema."""
    schema = checked_identifier(schema)
    if await conn.fetchval("SELECT to_regclass($1)", f"{schema}.schema_migrations") is None:
        return [migration.version for migration in plan]
    applied = {row["version"] for row in
               await conn.fetch(f'SELECT version FROM "{schema}".schema_migrations')}
    return [migration.version for migration in plan if migration.version not in applied]
