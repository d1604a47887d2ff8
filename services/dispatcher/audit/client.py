"""The ledger's side of a downstream's audit API (``shared.contracts.audit``)."""

from __future__ import annotations

from datetime import datetime

import aiohttp
from pydantic import ValidationError

from shared.contracts.audit import MAX_LISTED, AuditedEffect, EffectListing, EffectsByKey


class AuditUnavailable(Exception):
    """The downstream did not answer the audit, or not in its contract: nothing is concluded."""


class AuditClient:
    def __init__(self, session: aiohttp.ClientSession, audit_url: str) -> None:
        self._session = session
        self._base = audit_url.rstrip("/")

    async def listed(self, tool: str, since: datetime, until: datetime) -> list[AuditedEffect]:
        """Every effect of ``tool`` the downstream applied in ``[since, until)``, page by page."""
        effects: list[AuditedEffect] = []
        query = {"tool_name": tool, "since": since.isoformat(), "until": until.isoformat()}
        while True:
            page = await self._answer(self._session.get(f"{self._base}/effects", params=query))
            effects += page.effects
            if page.next is None:
                return effects
            query["after"] = page.next

    async def by_key(self, tool: str, keys: list[str]) -> list[AuditedEffect]:
        """The effects the downstream holds under any of ``keys``, however old."""
        effects: list[AuditedEffect] = []
        for start in range(0, len(keys), MAX_LISTED):
            asked = EffectsByKey(tool_name=tool, operation_keys=keys[start:start + MAX_LISTED])
            effects += (await self._answer(self._session.post(
                f"{self._base}/effects/by-key", json=asked.model_dump(mode="json")))).effects
        return effects

    async def _answer(self, request) -> EffectListing:
        try:
            async with request as response:
                if response.status != 200:
                    raise AuditUnavailable(f"{response.url} answered {response.status}: "
                                           f"{(await response.text())[:200]}")
                return EffectListing.model_validate_json(await response.read())
        except (aiohttp.ClientError, TimeoutError) as error:
            raise AuditUnavailable(f"the audit API is unreachable: {error!r}") from error
        except ValidationError as error:
            raise AuditUnavailable(f"the audit API answered outside its contract: {error}") from error
