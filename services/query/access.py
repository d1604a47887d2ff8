"""Who is asking, and the database transaction that can show them only their rows.

Isolation is PostgreSQL's job, not the WHERE clauses': each request's queries run in a
read-only transaction switched to a NOLOGIN role under row-level security
(``migrations/0001_query.sql``), with the caller's tenant in a transaction-local setting.
Both end with the transaction, so a pooled connection never carries them to the next request.
"""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg

from services.query.settings import OPERATOR

TENANT_ROLE = "intentledger_query_tenant"
OPERATOR_ROLE = "intentledger_query_operator"


@dataclass(frozen=True)
class Access:
    tenant: str | None
    """The one tenant whose rows this caller sees; None for an operator (every tenant)."""

    @property
    def operator(self) -> bool:
        return self.tenant is None

    @property
    def role(self) -> str:
        return OPERATOR_ROLE if self.operator else TENANT_ROLE


OPERATOR_ACCESS = Access(tenant=None)


def run_tenant(access: Access, asked: str | None) -> str | None:
    """The tenant whose run of an id the caller means (shared/runs.py): a tenant caller's own,
    from its credential; an operator's ``?tenant=``. None: the caller named none (an operator)
    or one it cannot see (a tenant naming another): answered 400 and 404 by the API."""
    if access.operator:
        return asked or None
    return access.tenant if asked in (None, access.tenant) else None


def access_for(key: str | None, api_keys: Mapping[str, str]) -> Access | None:
    """The access an API key grants, or None; every key is compared in constant time."""
    if not key:
        return None
    granted = None
    for known, tenant in api_keys.items():
        if hmac.compare_digest(known.encode(), key.encode()):
            granted = Access(tenant=None if tenant == OPERATOR else tenant)
    return granted


@asynccontextmanager
async def scoped(pool: asyncpg.Pool, access: Access, *,
                 statement_timeout_ms: int = 10_000) -> AsyncIterator[asyncpg.Connection]:
    """A read-only transaction that sees what ``access`` may see, and nothing else."""
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        await conn.execute(f"SET LOCAL ROLE {access.role}")
        await conn.execute("SELECT set_config('intentledger.tenant', $1, true), "
                           "set_config('statement_timeout', $2, true)",
                           access.tenant or "", str(statement_timeout_ms))
        yield conn
