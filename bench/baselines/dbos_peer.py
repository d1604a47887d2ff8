"""The peer: the same four-step pipeline as a DBOS Transact durable workflow, on the same PostgreSQL.

DBOS Transact (PyPI ``dbos``, pinned in pyproject's ``bench`` extra) checkpoints every step of a
workflow in PostgreSQL and resumes a crashed workflow from its last completed step: durable
execution without Kafka. Here one workflow per proposal runs the pipeline our services split
across Kafka hops, each step a plain ``DBOS.step`` over an asyncpg pool, checkpointed in DBOS's
system tables after its own commit; its writes are idempotent by key, as our consumers' are, so a
step re-run after a crash between the two changes nothing. That is DBOS's fastest durable shape
for this pipeline: ``steps="transaction"`` (DBOS datasource transactions, the step's writes and
a checkpoint committing together) runs each step as a system-database step too, around the
datasource transaction and its own checkpoint and ownership checks: ~1.7x the statements
(87 against 51 per workflow) and half the throughput, for no guarantee this idempotent pipeline
needs:

1. intake: validate the proposal, record the intent (unique operation key);
2. policy: decide (amount limit, allowed tool), record the decision;
3. dispatch: debit a wallet row idempotently by operation key (unique debit row + balance update);
4. project: upsert the read-model row.

The workflow id is the operation key (DBOS's own idempotency: starting it again returns the
same workflow). Tuned fairly: a fresh database of its own on the same server (system tables and
datasource checkpoints in schema ``dbos``, application tables in ``peer``), steps at READ
COMMITTED (as our services; DBOS defaults to SERIALIZABLE), connection pools sized to the
concurrency (no pre-ping; last-in-first-out, so one workflow in flight reuses one warm
connection and backend instead of cycling through the whole pool; the asyncpg pool skips its
session-reset round trip on release, as our services' pools do: the steps change no session
state), no concurrency cap
(workflows started directly, or in ``queue`` mode through a queue with no limit polled every
10 ms, whose results are polled every 10 ms too),
10 ms notification polling, no tracing, no cloud. Same durability as ours:
``synchronous_commit=on`` (checked).

Figures: ``workflows_per_s`` with ``concurrency`` starters each starting a workflow and awaiting
its result in a loop for ``seconds`` (saturation), and ``p50_ms``/``p99_ms`` of start → result
with one workflow in flight. Afterwards every workflow is checked: one intent, one decision, one
debit and one read-model row per workflow, balances adding up, every workflow SUCCESS.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
from typing import Any

import asyncpg
import sqlalchemy as sa

from bench.baselines import _peer_pipeline as pipeline_steps
from bench.baselines._common import quantile, require_durable, scratch_name
from shared.config import Endpoints
from shared.db.pool import TransactionScopedConnection

QUEUE = "bench-peer"


async def run(endpoints: Endpoints, *, seconds: float = 10.0, concurrency: int = 32,
              latency_workflows: int = 200, wallets: int = 1000, mode: str = "direct",
              steps: str = "step", warmup_workflows: int = 50) -> dict:
    """Returns ``workflows_per_s``, ``p50_ms``, ``p99_ms`` (one in flight), ``saturated_p50_ms``,
    ``saturated_p99_ms``, ``completed``, ``concurrency``, ``seconds``, ``mode``, ``steps``,
    ``dbos_version``, ``synchronous_commit``, ``checked`` (the correctness check passed).

    ``mode``: ``direct`` (``start_workflow_async``) or ``queue`` (an uncapped queue polled every
    10 ms). ``steps``: ``step`` (``DBOS.step`` over an asyncpg pool; ``direct`` mode only: queued
    workflows run on DBOS's own event loop) or ``transaction`` (datasource transactions)."""
    if mode not in ("direct", "queue") or steps not in ("transaction", "step"):
        raise ValueError("mode is 'direct' or 'queue'; steps is 'transaction' or 'step'")
    if mode == "queue" and steps == "step":
        raise ValueError("steps='step' runs on the caller's event loop: mode='direct' only")
    admin = await asyncpg.connect(endpoints.database_url)
    database = scratch_name("intentledger_dbos")
    try:
        synchronous_commit = await require_durable(admin)
        await admin.execute(f'CREATE DATABASE "{database}"')
        url = _with_database(endpoints.database_url, database)
        await pipeline_steps.create_tables(url, wallets)
        peer = await _Peer.launch(url, concurrency, mode, steps)
        try:
            await peer.sequential(warmup_workflows, wallets)
            latencies = await peer.sequential(latency_workflows, wallets)
            completed, elapsed, saturated = await peer.saturate(concurrency, seconds, wallets)
        finally:
            await peer.close()
        started = warmup_workflows + latency_workflows + completed
        await pipeline_steps.check(url, started)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()
    return {
        "workflows_per_s": completed / elapsed,
        "p50_ms": quantile(latencies, 0.50),
        "p99_ms": quantile(latencies, 0.99),
        "saturated_p50_ms": quantile(saturated, 0.50),
        "saturated_p99_ms": quantile(saturated, 0.99),
        "completed": completed,
        "concurrency": concurrency,
        "seconds": elapsed,
        "mode": mode,
        "steps": steps,
        "dbos_version": importlib.metadata.version("dbos"),
        "synchronous_commit": synchronous_commit,
        "checked": True,
    }


class _Peer:
    """One launched DBOS instance (a process-wide singleton: one peer at a time)."""

    def __init__(self, dbos_class: Any, datasource: Any, asyncpg_pool: Any, pipeline: Any, mode: str,
                 previous_executor: Any) -> None:
        self._dbos, self._datasource, self._asyncpg_pool = dbos_class, datasource, asyncpg_pool
        self._pipeline, self._mode, self._previous_executor = pipeline, mode, previous_executor

    @classmethod
    async def launch(cls, url: str, concurrency: int, mode: str, steps: str) -> _Peer:
        from dbos import DBOS, AsyncSQLAlchemyDatasource

        pool = concurrency + 8
        # DBOS makes its own thread pool the loop's default executor and shuts that pool down in
        # destroy(): the caller's later asyncio.to_thread calls must get theirs back.
        previous_executor = getattr(asyncio.get_running_loop(), "_default_executor", None)
        DBOS(config={
            "name": "intentledger-bench-peer",
            "system_database_url": url,
            "sys_db_pool_size": pool,
            "db_engine_kwargs": {"pool_size": pool, "max_overflow": 0, "pool_timeout": 30,
                                 "pool_pre_ping": False, "pool_use_lifo": True,
                                 "connect_args": {"application_name": "dbos_bench_peer"}},
            "notification_listener_polling_interval_sec": 0.01,
            "log_level": "WARNING",
            "enable_otlp": False,
            "application_version": "bench",
        })
        datasource = asyncpg_pool = None
        try:
            if steps == "transaction":
                datasource = await AsyncSQLAlchemyDatasource.create(
                    url, engine_kwargs={"pool_size": pool, "max_overflow": 0, "pool_pre_ping": False,
                                        "pool_use_lifo": True})
            else:
                asyncpg_pool = await asyncpg.create_pool(
                    url, min_size=1, max_size=pool, connection_class=TransactionScopedConnection)
            pipeline = _register(DBOS, datasource, asyncpg_pool)
            await asyncio.to_thread(DBOS.launch)
            peer = cls(DBOS, datasource, asyncpg_pool, pipeline, mode, previous_executor)
        except BaseException:
            DBOS.destroy(destroy_registry=True)
            _restore_executor(previous_executor)
            if datasource is not None:
                await datasource.engine.dispose()
            if asyncpg_pool is not None:
                await asyncpg_pool.close()
            raise
        if mode == "queue":
            try:
                await DBOS.register_queue_async(QUEUE, polling_interval_sec=0.01)
            except BaseException:
                await peer.close()
                raise
        return peer

    async def one(self, wallets: int) -> float:
        from dbos import SetWorkflowID

        proposal = pipeline_steps.new_proposal(wallets)
        started = time.perf_counter()
        with SetWorkflowID(proposal["operation_key"]):
            if self._mode == "queue":
                handle = await self._dbos.enqueue_workflow_async(QUEUE, self._pipeline, proposal)
            else:
                handle = await self._dbos.start_workflow_async(self._pipeline, proposal)
        if self._mode == "queue":
            result = await handle.get_result(polling_interval_sec=0.01)
        else:
            result = await handle.get_result()
        if result["outcome"] != "allowed" or not result["debited"]:
            raise RuntimeError(f"workflow {proposal['operation_key']} ended {result}")
        return (time.perf_counter() - started) * 1000

    async def sequential(self, count: int, wallets: int) -> list[float]:
        return [await self.one(wallets) for _ in range(count)]

    async def saturate(self, concurrency: int, seconds: float,
                       wallets: int) -> tuple[int, float, list[float]]:
        latencies: list[float] = []
        started = time.perf_counter()
        deadline = started + seconds

        async def starter() -> None:
            while time.perf_counter() < deadline:
                latencies.append(await self.one(wallets))

        await asyncio.gather(*(starter() for _ in range(concurrency)))
        return len(latencies), time.perf_counter() - started, latencies

    async def close(self) -> None:
        self._dbos.destroy(destroy_registry=True)  # nothing in flight: returns promptly
        _restore_executor(self._previous_executor)
        if self._datasource is not None:
            await self._datasource.engine.dispose()
        if self._asyncpg_pool is not None:
            await self._asyncpg_pool.close()


def _restore_executor(previous: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    asyncio.get_running_loop().set_default_executor(previous or ThreadPoolExecutor())


def _register(DBOS: Any, datasource: Any, pool: asyncpg.Pool | None) -> Any:
    """The workflow and its steps, registered afresh in DBOS's (just reset) registry. Steps are
    datasource transactions, or with ``pool`` plain ``DBOS.step``s each running one asyncpg
    transaction (their writes are idempotent by key, so a step re-run after a crash between its
    commit and DBOS's checkpoint changes nothing)."""
    if pool is None:
        decorate = datasource.transaction(isolation_level="READ COMMITTED")

        def step(logic: Any) -> Any:
            async def run_in_session(*args: Any) -> Any:
                return await logic(pipeline_steps.SessionDb(await datasource.sql_session().connection()),
                                   *args)
            run_in_session.__name__ = run_in_session.__qualname__ = logic.__name__
            return decorate(run_in_session)
    else:
        def step(logic: Any) -> Any:
            async def run_in_transaction(*args: Any) -> Any:
                async with pool.acquire() as conn, conn.transaction():
                    return await logic(pipeline_steps.PoolDb(conn), *args)
            run_in_transaction.__name__ = run_in_transaction.__qualname__ = logic.__name__
            return DBOS.step(name=logic.__name__)(run_in_transaction)

    intake, decide, dispatch, project = (step(logic) for logic in (
        pipeline_steps.intake, pipeline_steps.decide, pipeline_steps.dispatch,
        pipeline_steps.project))

    @DBOS.workflow(name="bench_peer_pipeline")
    async def pipeline(proposal: dict) -> dict:
        call_id = await intake(proposal)
        outcome = await decide(call_id, proposal)
        debited = await dispatch(call_id, proposal) if outcome == "allowed" else False
        await project(call_id, outcome, debited)
        return {"logical_call_id": call_id, "outcome": outcome, "debited": debited}

    return pipeline


def _with_database(url: str, database: str) -> str:
    return str(sa.make_url(url).set(database=database).render_as_string(hide_password=False))
