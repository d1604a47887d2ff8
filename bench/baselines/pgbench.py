"""Baseline: what PostgreSQL itself commits with the services' state+outbox transaction shape.

PostgreSQL's own load driver (``pgbench``, C, prepared statements, no Python in the path) runs a
custom script against scratch tables in a scratch schema: in ONE transaction, upsert a state row
(``INSERT .. ON CONFLICT DO UPDATE``: insert on first touch, update afterwards) and insert an
outbox row with a jsonb envelope. The outbox is made by the services' own migrations
(shared/db/migrations/messaging: columns, generated shard, indexes, the statement-level trigger
that NOTIFYs the relay's channel), so each commit costs what a service's commit costs; run it
with the stack stopped, as ``bench.e2e`` does, or the relay wakes for every one. Three
variants, same server settings (``synchronous_commit=on``, checked):

- ``single``: one row pair per transaction, ``clients`` sessions → ``tps`` (the per-event ceiling
  of a design that commits once per message);
- ``batched``: ``batch_rows`` row pairs per transaction (one set-based statement each, as the
  services write a consumed batch) → ``batch_row_pairs_per_s`` (the ceiling with batching);
- ``single`` again with the NOTIFY trigger disabled → ``tps_without_notify``. PostgreSQL
  serializes every committing transaction that sent a NOTIFY on one cluster-wide lock it holds
  until the commit is flushed (``PreCommit_Notify`` in ``src/backend/commands/async.c``), so
  such commits cannot share a WAL flush: the ratio is what the relay's wake-up costs the
  writers' commits, and ``tps`` is the ceiling of NOTIFYing commits on this disk.

Fair because it is the best case for the database: no network hops but loopback, no Kafka, no
application work; our pipeline should be compared with it, not expected to exceed it per commit.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

import asyncpg

from bench.baselines._common import require_durable, scratch_name, scratch_outbox
from shared.config import Endpoints
from shared.messaging.envelope import Envelope

KEY_SPACE = 1_000_000


async def run(endpoints: Endpoints, *, seconds: float = 10.0, clients: int = 16,
              threads: int | None = None, batch_rows: int = 100) -> dict:
    """The three variants for ``seconds`` each. Returns ``tps``, ``latency_avg_ms`` (single),
    ``batch_tps``, ``batch_row_pairs_per_s``, ``batch_latency_avg_ms`` (batched),
    ``tps_without_notify``, ``latency_avg_ms_without_notify`` (single, no NOTIFY), and
    ``clients``, ``threads``, ``seconds``, ``batch_rows``, ``synchronous_commit``,
    ``failed_transactions``, ``outbox_rows`` (checked: at least what pgbench counted), ``pgbench``."""
    binary = pgbench_binary()
    threads = threads or min(clients, os.cpu_count() or 1)
    schema = scratch_name("bench_pgbench")
    conn = await asyncpg.connect(endpoints.database_url)
    try:
        synchronous_commit = await require_durable(conn)
        await scratch_outbox(conn, schema)
        await conn.execute(_state_ddl(schema))
        with tempfile.TemporaryDirectory(prefix="pgbench-") as folder:
            single_script, batched_script = Path(folder, "single.sql"), Path(folder, "batched.sql")
            single_script.write_text(_single_script(schema))
            batched_script.write_text(_batched_script(schema, batch_rows))
            env = _libpq_env(endpoints.database_url)
            common = ["-n", "-M", "prepared", "-c", str(clients), "-j", str(threads),
                      "-T", str(max(1, round(seconds)))]
            single = await _pgbench(binary, [*common, "-f", str(single_script)], env)
            batched = await _pgbench(binary, [*common, "-f", str(batched_script)], env)
            await conn.execute(f'ALTER TABLE "{schema}".outbox DISABLE TRIGGER outbox_notify')
            unnotified = await _pgbench(binary, [*common, "-f", str(single_script)], env)
        pairs = await conn.fetchval(f'SELECT count(*) FROM "{schema}".outbox')
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()
    expected = (single["transactions"] + batched["transactions"] * batch_rows
                + unnotified["transactions"])
    if pairs < expected:
        raise RuntimeError(f"pgbench reported {expected} row pairs committed but the outbox holds {pairs}")
    return {
        "tps": single["tps"],
        "latency_avg_ms": single["latency_avg_ms"],
        "batch_tps": batched["tps"],
        "batch_row_pairs_per_s": batched["tps"] * batch_rows,
        "batch_latency_avg_ms": batched["latency_avg_ms"],
        "batch_rows": batch_rows,
        "tps_without_notify": unnotified["tps"],
        "latency_avg_ms_without_notify": unnotified["latency_avg_ms"],
        "clients": clients,
        "threads": threads,
        "seconds": max(1, round(seconds)),
        "failed_transactions": single["failed"] + batched["failed"] + unnotified["failed"],
        "outbox_rows": pairs,
        "synchronous_commit": synchronous_commit,
        "pgbench": binary,
    }


def pgbench_binary() -> str:
    """The newest Debian-packaged pgbench, else one on PATH."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench"),
                        key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0)
    found = candidates[-1] if candidates else shutil.which("pgbench")
    if not found:
        raise RuntimeError("pgbench not found: `apt-get install -y postgresql-contrib` or postgresql")
    return found


def _state_ddl(schema: str) -> str:
    return f"""
CREATE TABLE "{schema}".state (
    id         bigint PRIMARY KEY,
    version    bigint NOT NULL,
    data       jsonb NOT NULL,
    updated_at timestamptz NOT NULL
);"""


def _literals() -> tuple[str, str, str]:
    """A real envelope and its headers (as the services write them), and a state document."""
    envelope = Envelope.new(event_type="ProposalAccepted", run_id="run-0", producer="proposal-intake",
                            payload={"logical_call_id": "0192f3a1-7c1e-7000-8000-000000000000",
                                     "tool_name": "wallet.debit", "amount_minor": 1250,
                                     "currency": "EUR", "state": "accepted"})
    state = {"tool_name": "wallet.debit", "state": "accepted", "arguments": {"amount_minor": 1250}}
    quote = lambda text: text.replace("'", "''")  # noqa: E731
    # json.dumps puts a space after every colon: pgbench would read ``:null`` as a variable.
    return (quote(json.dumps(json.loads(envelope.model_dump_json()))),
            quote(json.dumps(envelope.headers())), quote(json.dumps(state)))


def _single_script(schema: str) -> str:
    envelope, headers, state = _literals()
    return f"""\\set id random(1, {KEY_SPACE})
BEGIN;
INSERT INTO "{schema}".state AS s (id, version, data, updated_at) VALUES (:id::bigint, 1, '{state}'::jsonb, now()) ON CONFLICT (id) DO UPDATE SET version = s.version + 1, data = excluded.data, updated_at = now();
INSERT INTO "{schema}".outbox (event_id, topic, partition_key, headers, envelope) VALUES (gen_random_uuid(), 'bench.pgbench', 'run-' || :id::bigint, '{headers}'::jsonb, '{envelope}'::jsonb || jsonb_build_object('seq', :id::bigint));
END;
"""  # noqa: E501


def _batched_script(schema: str, rows: int) -> str:
    envelope, headers, state = _literals()
    return f"""\\set base random(0, {KEY_SPACE // rows - 1}) * {rows}
BEGIN;
INSERT INTO "{schema}".state AS s (id, version, data, updated_at) SELECT :base::bigint + g, 1, '{state}'::jsonb, now() FROM generate_series(1, {rows}) AS g ON CONFLICT (id) DO UPDATE SET version = s.version + 1, data = excluded.data, updated_at = now();
INSERT INTO "{schema}".outbox (event_id, topic, partition_key, headers, envelope) SELECT gen_random_uuid(), 'bench.pgbench', 'run-' || (:base::bigint + g), '{headers}'::jsonb, '{envelope}'::jsonb || jsonb_build_object('seq', :base::bigint + g) FROM generate_series(1, {rows}) AS g;
END;
"""  # noqa: E501


def _libpq_env(database_url: str) -> dict[str, str]:
    """The URL as libpq environment variables (so no password shows in a process list)."""
    url = urlsplit(database_url)
    env = {**os.environ, "PGHOST": url.hostname or "localhost", "PGPORT": str(url.port or 5432),
           "PGDATABASE": unquote(url.path.lstrip("/")) or "postgres"}
    if url.username:
        env["PGUSER"] = unquote(url.username)
    if url.password:
        env["PGPASSWORD"] = unquote(url.password)
    for name, value in parse_qsl(url.query):
        if name in ("sslmode", "sslrootcert", "sslcert", "sslkey"):
            env[f"PG{name.upper()}"] = value
    return env


async def _pgbench(binary: str, arguments: list[str], env: dict[str, str]) -> dict:
    process = await asyncio.create_subprocess_exec(binary, *arguments, env=env,
                                                   stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await process.communicate()
    text = stdout.decode()
    if process.returncode != 0 or "tps = " not in text:
        raise RuntimeError(f"pgbench failed ({process.returncode}): {stderr.decode()[-2000:]}{text[-2000:]}")
    failed = re.search(r"number of failed transactions: (\d+)", text)
    return {"tps": float(re.search(r"tps = ([\d.]+)", text).group(1)),
            "latency_avg_ms": float(re.search(r"latency average = ([\d.]+) ms", text).group(1)),
            "transactions": int(re.search(r"number of transactions actually processed: (\d+)",
                                          text).group(1)),
            "failed": int(failed.group(1)) if failed else 0}
