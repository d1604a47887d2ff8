"""Connection pools. Nothing connects at import time: services open pools in their lifespan."""

from __future__ import annotations

import asyncpg


async def open_pool(database_url: str, *, application_name: str, min_size: int = 1,
                    max_size: int = 10) -> asyncpg.Pool:
    """``application_name`` makes a service's sessions findable in ``pg_stat_activity``."""
    return await asyncpg.create_pool(
        database_url,
        server_settings={"application_name": application_name},
        min_size=min_size,
        max_size=max_size,
        # Statements are prepared per connection; after a failover or a terminated backend the
        # pool simply opens a new connection and prepares again.
        max_inactive_connection_lifetime=60.0,
        command_timeout=30.0,
    )
