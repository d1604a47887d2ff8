"""The query API refuses to serve as a login that row-level security does not bind.

Tenant isolation rests on the policies of ``migrations/0001_query.sql`` and the FORCE of
``0003_query_login.sql``; a superuser or a BYPASSRLS role skips both, and so would the owner of
the read models were FORCE ever dropped. Such a login would turn one forgotten ``SET LOCAL
ROLE`` into every tenant's rows, so the process stops at start instead, naming the login to use.
"""

from __future__ import annotations

import asyncpg

from shared.db.roles import QUERY_LOGIN

READ_MODELS = ("projection.runs", "projection.calls", "projection.events")


class UnsafeLogin(RuntimeError):
    """The database login would see past row-level security."""


async def refuse_unsafe_login(pool: asyncpg.Pool) -> None:
    row = await pool.fetchrow(
        "SELECT current_user AS login, rolsuper, rolbypassrls, "
        "       (SELECT array_agg(c.oid::regclass::text ORDER BY c.oid::regclass::text) "
        "          FROM pg_class c WHERE c.oid::regclass::text = ANY($1::text[]) "
        "           AND pg_has_role(current_user, c.relowner, 'MEMBER')) AS owned "
        "FROM pg_roles WHERE rolname = current_user", list(READ_MODELS))
    problems = [what for what, bad in (("a superuser", row["rolsuper"]),
                                       ("BYPASSRLS", row["rolbypassrls"]),
                                       (f"the owner of {', '.join(row['owned'] or [])}",
                                        row["owned"])) if bad]
    if problems:
        raise UnsafeLogin(
            f"the query API logs in as {row['login']!r}, which is {' and '.join(problems)}: "
            "row-level security would not bind it. Connect as the deployment's query role, e.g. "
            f"INTENTLEDGER_DATABASE_URL=postgresql://{QUERY_LOGIN}@<host>:<port>/<database> "
            "(docs/deploy.md, 'The query API's login')")
