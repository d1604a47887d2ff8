"""``--transactions-rate``: where each service's transactions spend their time, from
PostgreSQL's own statement log, during the step of that rate.

For part of the step PostgreSQL logs every statement with its duration
(``log_min_duration_statement = 0`` and a prefix naming the time, backend and application,
set with ALTER SYSTEM and reset afterwards: the benchmark's server is its own). A transaction
is one backend's BEGIN … COMMIT; a service's sessions are told apart by their
``application_name``. Per service, its commonest transaction shapes (their sequence of
statements) with the transaction's mean span (BEGIN's start to COMMIT's end), the mean time
PostgreSQL spent executing its statements, and per statement the mean gap before it: from the
end of the previous statement to the start of this one, which is the service's own work
between the two plus the round trip's wake-ups. py-spy (``--profile-rate``) says what a
service's CPU does; this says where a hop's wall time goes, at rates where the machine is
mostly idle and wake-ups, not work, are much of it (``bench.baselines.hop_floor``).

The log's timestamps have millisecond resolution, so one gap is known to ±1 ms; the means over
a step's hundreds of transactions are not biased by it.
"""

from __future__ import annotations

import asyncio
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from bench.e2e.config import Config
from bench.e2e.server_settings import configure
from bench.e2e.steps import Step

PREFIX = "%m [%p] %a: "
SETTINGS = {"log_min_duration_statement": "0", "log_line_prefix": PREFIX}
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \S+ \[(\d+)\] ([^:]*): LOG:  "
                  r"duration: ([\d.]+) ms  (statement|execute|parse|bind)[^:]*: (.*)$")
"""One logged statement: its end time, backend, application, duration, protocol phase, text.
Continuation lines of a statement's text do not match and are skipped."""
APPLICATION_PREFIX = "intentledger-"
SHAPES = 3
"""The commonest transaction shapes reported per service."""
MIN_TRANSACTIONS = 10
"""A shape seen fewer times than this in the step is left out (start-up, migrations)."""
LABEL_CHARS = 60


@dataclass
class _Statement:
    ended_ms: float
    label: str
    exec_ms: float


class TransactionLog:
    def __init__(self, config: Config, pool: asyncpg.Pool, log_path: Path) -> None:
        self.config = config
        self.pool = pool
        self.log_path = log_path
        self.summaries: dict[str, Any] = {}
        """Per service, its transactions' shapes; ``error`` when the log could not be read."""

    async def record(self, step: Step) -> None:
        """Log every statement during part of ``step`` and summarise each service's
        transactions of that time."""
        if not self.log_path.is_file():
            self.summaries["error"] = (f"no PostgreSQL log at {self.log_path}: the statement "
                                       "log needs the local PostgreSQL of `intentledger infra`")
            return
        await asyncio.sleep(min(5.0, step.planned_s / 4))
        seconds = max(1.0, min(self.config.profile_s, step.planned_s - 5))
        start = self.log_path.stat().st_size
        try:
            await self._configure(SETTINGS)
        except asyncpg.PostgresError as error:  # not a superuser: the run goes on without it
            self.summaries["error"] = f"the statement log could not be switched on: {error}"
            return
        try:
            await asyncio.sleep(seconds)
        finally:
            await self._configure(dict.fromkeys(SETTINGS))
        with self.log_path.open(errors="replace") as log:
            log.seek(start)
            self.summaries = summarise(log) | {"rate": step.rate, "seconds": seconds}

    async def _configure(self, settings: dict[str, str | None]) -> None:
        async with self.pool.acquire() as conn:
            await configure(conn, settings)


def summarise(lines: Iterable[str]) -> dict[str, Any]:
    """Per service (``application_name`` without ``intentledger-``), its transactions' count
    and its commonest shapes, from log lines written with ``PREFIX``."""
    open_by_backend: dict[str, tuple[str, list[_Statement]]] = {}
    done: dict[str, list[list[_Statement]]] = defaultdict(list)
    for line in lines:
        if (match := LINE.match(line)) is None:
            continue
        at, backend, application, duration, phase, text = match.groups()
        if phase in ("parse", "bind") or not application.startswith(APPLICATION_PREFIX):
            continue
        ended_ms = datetime.strptime(at, "%Y-%m-%d %H:%M:%S.%f").timestamp() * 1000
        statement = _Statement(ended_ms, _label(text), float(duration))
        keyword = statement.label.split(" ", 1)[0].rstrip(";").upper()
        if keyword in ("BEGIN", "START"):
            open_by_backend[backend] = (application, [statement])
        elif backend in open_by_backend:
            application, statements = open_by_backend[backend]
            statements.append(statement)
            if keyword in ("COMMIT", "END"):
                done[application.removeprefix(APPLICATION_PREFIX)].append(statements)
                del open_by_backend[backend]
            elif keyword == "ROLLBACK":
                del open_by_backend[backend]
    return {service: {"transactions": len(transactions), "shapes": _shapes(transactions)}
            for service, transactions in sorted(done.items())}


def _shapes(transactions: list[list[_Statement]]) -> list[dict[str, Any]]:
    by_shape: dict[tuple[str, ...], list[list[_Statement]]] = defaultdict(list)
    for statements in transactions:
        by_shape[tuple(s.label for s in statements)].append(statements)
    counted = Counter({shape: len(found) for shape, found in by_shape.items()})
    return [_shape(shape, by_shape[shape]) for shape, count in counted.most_common(SHAPES)
            if count >= MIN_TRANSACTIONS]


def _shape(labels: tuple[str, ...], found: list[list[_Statement]]) -> dict[str, Any]:
    def mean(values: Iterable[float]) -> float:
        return round(statistics.fmean(values), 3)

    statements = [{"statement": labels[0], "gap_ms": None,
                   "exec_ms": mean(t[0].exec_ms for t in found)}]
    statements += [{"statement": label,
                    "gap_ms": mean(t[i].ended_ms - t[i].exec_ms - t[i - 1].ended_ms
                                   for t in found),
                    "exec_ms": mean(t[i].exec_ms for t in found)}
                   for i, label in enumerate(labels) if i > 0]
    span = mean(t[-1].ended_ms - t[0].ended_ms + t[0].exec_ms for t in found)
    executing = mean(sum(s.exec_ms for s in t) for t in found)
    return {"count": len(found), "span_ms": span, "executing_ms": executing,
            "between_ms": round(span - executing, 3), "statements": statements}


def _label(text: str) -> str:
    return " ".join(text.split())[:LABEL_CHARS]
