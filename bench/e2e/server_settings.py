"""Server settings the benchmark changes for a while and then resets: ALTER SYSTEM and a reload,
so that every session sees them, the services' too (the benchmark's server is its own)."""

from __future__ import annotations

import asyncpg


async def configure(conn: asyncpg.Connection, settings: dict[str, str | None]) -> None:
    """Set each of ``settings``; ``None`` resets one to the server's own."""
    for name, value in settings.items():
        if value is None:
            await conn.execute(f"ALTER SYSTEM RESET {name}")
        else:
            await conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
    await conn.execute("SELECT pg_reload_conf()")
