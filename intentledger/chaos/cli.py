"""``intentledger chaos run FILE|DIR...``: attach to Kafka and PostgreSQL (the endpoints in the
environment, else ``infra up``), apply migrations, run each protocol with its own processes.
Exit status 0 only when every scenario passed."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from shared.contracts.fault_protocol import load
from intentledger.chaos.report import as_json, text
from intentledger.chaos.runner import Scenario
from shared.db.schemas import migrate_all
from shared import infra
from shared.config import Settings


def protocol_files(arguments: list[str]) -> list[Path]:
    """Files as given; a directory stands for its ``*.json`` files, sorted."""
    paths: list[Path] = []
    for argument in map(Path, arguments):
        paths += sorted(argument.glob("*.json")) if argument.is_dir() else [argument]
    return paths


async def chaos_run(settings: Settings, arguments: list[str], *, as_json_output: bool) -> int:
    paths = protocol_files(arguments)
    protocols = [(path, load(path)) for path in paths]  # every file valid before anything runs
    endpoints = await asyncio.to_thread(infra.attach, settings)
    await migrate_all(settings)
    for chatty in ("aiokafka", "asyncpg"):  # the runner's own reconnects during outages
        logging.getLogger(chatty).setLevel(logging.CRITICAL)
    reports = []
    for path, protocol in protocols:
        report = await Scenario(path, protocol, endpoints, settings).run()
        reports.append(report)
        if not as_json_output:
            print(text(report), flush=True)
    passed = sum(r.passed for r in reports)
    if as_json_output:
        print(as_json(reports))
    else:
        print(f"\n{passed} of {len(reports)} scenarios passed")
    return 0 if passed == len(reports) else 1
