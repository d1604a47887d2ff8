"""Connection pools. Nothing connects at import time: services open pools in their lifespan."""

from __future__ import annotations

import asyncpg


class TransactionScopedConnection(asyncpg.Connection):
    """A pooled connection released without asyncpg's session reset.

    asyncpg resets every connection it takes back (``pg_advisory_unlock_all(); CLOSE ALL;
    UNLISTEN *; RESET ALL``): one more round trip per transaction, which in a pipeline of short
    transactions was about a tenth of all statements sent. It resets nothing here, because no
    service leaves session state on a pooled connection: settings are ``SET LOCAL`` /
    ``set_config(..., true)``, advisory locks are ``_xact_`` locks, cursors live inside
    transactions, and LISTEN has a connection of its own (``shared.db.wakeup``).
    ``tests/unit/test_pool_sessions.py`` keeps the source to that, and asyncpg still rolls back a
    transaction left open before the connection goes back to the pool."""

    def get_reset_query(self) -> str:
        return ""


async def open_pool(database_url: str, *, application_name: str, min_size: int = 1,
                    max_size: int = 10, reset_sessions: bool = False) -> asyncpg.Pool:
    """``application_name`` makes a service's sessions findable in ``pg_stat_activity``.
    ``reset_sessions`` keeps asyncpg's reset on release, for a pool whose users run statements
    this codebase does not write (the query API's role switch is kept belt and braces)."""
    return await asyncpg.create_pool(
        database_url,
        server_settings={"application_name": application_name},
        min_size=min_size,
        max_size=max_size,
        connection_class=asyncpg.Connection if reset_sessions else TransactionScopedConnection,
        # Statements are prepared per connection; after a failover or a terminated backend the
        # pool simply opens a new connection and prepares again.
        max_inactive_connection_lifetime=60.0,
        command_timeout=30.0,
    )
