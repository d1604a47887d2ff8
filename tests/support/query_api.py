"""The query API served in the test's event loop, and a client that checks every answer
against the OpenAPI document the API serves (so the document is tested on real responses)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from jsonschema import Draft202012Validator

from services.query.console.settings import ConsoleSettings
from services.query.main import run_query
from services.query.settings import QuerySettings
from shared.config import Endpoints, Settings
from shared.db.schemas import migrate_all
from shared.infra.postgres_local import login_url


class QueryClient:
    def __init__(self, url: str, document: dict[str, Any], console_url: str | None = None) -> None:
        self.url = url
        self.document = document
        self.console_url = console_url or url
        """Where the console is served: beside the API, or on its own port."""

    async def get(self, path: str, key: str | None, **params: Any) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        query = [(name, str(v)) for name, value in params.items() if value is not None
                 for v in (value if isinstance(value, list) else [value])]
        async with aiohttp.ClientSession() as session, session.get(
                f"{self.url}{path}", headers=headers, params=query) as response:
            body = await response.json()
        self._conforms(path, response.status, body)
        return response.status, body

    async def pages(self, path: str, key: str, **params: Any) -> list[list[Any]]:
        """Every page, following ``next`` until the last."""
        pages, after = [], None
        while True:
            status, body = await self.get(path, key, after=after, **params)
            assert status == 200, body
            pages.append(body["items"])
            if (after := body["next"]) is None:
                return pages

    def _conforms(self, path: str, status: int, body: Any) -> None:
        operation = self._operation(path)
        response = operation["responses"].get(str(status)) if operation else None
        assert response is not None or status == 404, f"{path}: {status} is not documented"
        schema = (response or {"content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/ErrorBody"}}}})["content"]["application/json"]["schema"]
        Draft202012Validator({**schema, "components": self.document["components"]},
                             format_checker=Draft202012Validator.FORMAT_CHECKER).validate(body)

    def _operation(self, path: str) -> dict[str, Any] | None:
        for template, item in self.document["paths"].items():
            if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path):
                return item["get"]
        return None


@asynccontextmanager
async def query_api(endpoints: Endpoints, api_keys: dict[str, str], *,
                    console: ConsoleSettings | None = None,
                    resolutions_topic: str | None = None) -> AsyncIterator[QueryClient]:
    """The API process's composition root (with the console) on a free port, logged in as the
    deployment's query role; leaving stops it as SIGTERM would. The migrations it expects are
    applied first, as the projection (their owner) or ``intentledger migrate`` would."""
    await migrate_all(Settings(kafka_bootstrap=endpoints.kafka_bootstrap,
                               database_url=endpoints.database_url))
    stopping, started = asyncio.Event(), asyncio.get_running_loop().create_future()
    settings = Settings(kafka_bootstrap=endpoints.kafka_bootstrap,
                        database_url=login_url(endpoints.database_url))
    task = asyncio.create_task(run_query(settings, QuerySettings(port=0, api_keys=api_keys),
                                         stopping, started, console or ConsoleSettings(),
                                         resolutions_topic))
    await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED, timeout=60)
    if task.done():
        task.result()  # an API that died at start says why
    ports = started.result()
    url = f"http://127.0.0.1:{ports.api}"
    try:
        async with aiohttp.ClientSession() as session, session.get(f"{url}/openapi.json") as response:
            yield QueryClient(url, await response.json(), f"http://127.0.0.1:{ports.console}")
    finally:
        stopping.set()
        await task
