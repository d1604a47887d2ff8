"""The wallet's audit API (``shared.contracts.audit``): its debits and refunds as it holds them,
listed by the time they were applied or found by operation key. It reads the effect tables,
never the idempotency keys, so an effect whose key the wallet has forgotten is still listed
under that key. Served with the HTTP API (``http_api.py``), unauthenticated like it."""

from __future__ import annotations

from datetime import datetime

import asyncpg
from aiohttp import web
from pydantic import ValidationError

from downstreams.wallet.http_refusals import explained, malformed
from shared.contracts.audit import MAX_LISTED, AuditedEffect, EffectListing, EffectsByKey

EFFECTS = {"wallet.debit": ("debits", "debit_id"), "wallet.refund": ("refunds", "refund_id")}
"""Per tool: the table of its effects and their id column."""


def add_routes(app: web.Application, pool_key: web.AppKey) -> None:
    async def get_effects(request: web.Request) -> web.Response:
        return await listed(request, request.app[pool_key])

    async def post_by_key(request: web.Request) -> web.Response:
        return await by_key(request, request.app[pool_key])

    app.router.add_get("/audit/effects", get_effects)
    app.router.add_post("/audit/effects/by-key", post_by_key)


async def listed(request: web.Request, pool: asyncpg.Pool) -> web.Response:
    query = request.query
    table, id_column = _effects_of(query.get("tool_name"))
    since, until = _instant(query.get("since"), "since"), _instant(query.get("until"), "until")
    after_at, after_id = _cursor(query.get("after")) if "after" in query else (since, "")
    limit = _limit(query.get("limit", str(MAX_LISTED)))
    rows = await pool.fetch(
        f"{_select(table, id_column)} WHERE e.created_at >= $1 AND e.created_at < $2"
        f" AND (e.created_at, e.{id_column}) > ($3, $4) ORDER BY e.created_at, e.{id_column}"
        " LIMIT $5", since, until, after_at, after_id, limit + 1)
    effects = [_effect(row, query["tool_name"]) for row in rows[:limit]]
    last = effects[-1] if len(rows) > limit else None
    return _listing(EffectListing(effects=effects, next=last and (
        f"{last.applied_at.isoformat()}|{last.effect_id}")))


async def by_key(request: web.Request, pool: asyncpg.Pool) -> web.Response:
    try:
        asked = EffectsByKey.model_validate_json(await request.text())
    except ValidationError as error:
        raise malformed(explained(error)) from None
    table, id_column = _effects_of(asked.tool_name)
    rows = await pool.fetch(f"{_select(table, id_column)} WHERE e.operation_key = ANY($1::text[])"
                            f" ORDER BY e.created_at, e.{id_column}", asked.operation_keys)
    return _listing(EffectListing(effects=[_effect(row, asked.tool_name) for row in rows]))


def _select(table: str, id_column: str) -> str:
    return (f"SELECT e.operation_key, e.{id_column} AS effect_id, w.tenant AS tenant_id,"
            f" e.created_at AS applied_at FROM wallet.{table} e JOIN wallet.wallets w"
            " ON w.id = e.wallet_id")


def _effect(row: asyncpg.Record, tool: str) -> AuditedEffect:
    return AuditedEffect(tool_name=tool, **dict(row))


def _listing(listing: EffectListing) -> web.Response:
    return web.json_response(listing.model_dump(mode="json"))


def _effects_of(tool: str | None) -> tuple[str, str]:
    if tool not in EFFECTS:
        raise malformed(f"tool_name: one of {', '.join(EFFECTS)}")
    return EFFECTS[tool]


def _instant(value: str | None, name: str) -> datetime:
    try:
        instant = datetime.fromisoformat(value or "")
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        raise malformed(f"{name}: an RFC 3339 time with an offset")
    return instant


def _cursor(value: str) -> tuple[datetime, str]:
    at, _, effect_id = value.partition("|")
    return _instant(at, "after"), effect_id


def _limit(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= MAX_LISTED:
        raise malformed(f"limit: 1 to {MAX_LISTED}")
    return int(value)
