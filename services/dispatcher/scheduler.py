"""The loop that takes steps: claim a due call, hold its run's lease, step, commit, then do what
must happen outside the transaction (crash points, HTTP calls, recording their outcome).

Time comes from PostgreSQL (``clock_timestamp()``), not from this host: leases and deadlines
are compared by one clock however many replicas run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime

import asyncpg

from services.dispatcher import leases, repository as repo
from services.dispatcher.adapters.http import HttpEffectAdapter
from services.dispatcher.adapters.orders import Outcome
from services.dispatcher.breaker import Breakers
from services.dispatcher.metrics import STALE_WRITE, DispatcherMetrics
from services.dispatcher.retry_budget import backoff
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.steps import HttpWork, Stepper, dependency_of
from shared import faults
from shared.db.unit_of_work import UnitOfWork
from shared.db.wakeup import Wakeup
from shared.errors import is_retryable
from shared.retry import backoff_delay, dependency_backoff
from shared.tracing import continuing

log = logging.getLogger(__name__)

CRASH_POINTS = {
    "intent_recorded": "dispatcher.after_intent_before_send",
    "sent": "dispatcher.after_send_before_record",
    "compensation_requested": "dispatcher.mid_compensation",
}
_CONFIRMED = frozenset({"applied", "rejected", "not_found"})
RECORD_PATIENCE_S = 30.0


class Scheduler:
    def __init__(self, pool: asyncpg.Pool, stepper: Stepper, breakers: Breakers,
                 http: HttpEffectAdapter, settings: DispatcherSettings,
                 counted: DispatcherMetrics) -> None:
        self._pool = pool
        self._counted = counted
        self._stepper = stepper
        self._breakers = breakers
        self._http = http
        self._settings = settings

    async def run(self, wakeup: Wakeup, stopping: asyncio.Event) -> None:
        """``concurrency`` loops, each stepping one call at a time until nothing is due."""
        await asyncio.gather(*(self._loop(wakeup, stopping)
                               for _ in range(self._settings.concurrency)))

    async def _loop(self, wakeup: Wakeup, stopping: asyncio.Event) -> None:
        failures = 0
        while not stopping.is_set():
            try:
                found = await self.step_once()
                failures = 0
            except Exception as error:
                failures += 1
                log.log(logging.WARNING if is_retryable(error) else logging.ERROR,
                        "dispatcher step failed (%s); retrying", error,
                        exc_info=not is_retryable(error))
                await asyncio.sleep(backoff_delay(failures))
                continue
            if not found:
                await wakeup.wait(self._settings.scan_interval_s)

    async def step_once(self) -> bool:
        """Step one due call; False when none is due for this worker."""
        async with UnitOfWork(self._pool, repo.SCHEMA) as uow:
            conn = uow.connection
            await conn.execute("SET LOCAL lock_timeout = '5s'")
            # A worker paused inside a step (SIGSTOP, a long GC) must not keep the run's rows
            # locked past its lease: PostgreSQL ends the session, the step rolls back, and
            # another worker takes the run over with the next fence.
            await conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = "
                               f"'{int(self._settings.lease_ttl_s * 1000)}ms'")
            now: datetime = await conn.fetchval("SELECT clock_timestamp()")
            call = await repo.claim_due(conn, self._settings.worker_id, now)
            if call is None:
                return False
            lease = await leases.hold(conn, call.run_id, self._settings.worker_id,
                                      self._settings.lease_ttl_s, now)
            if lease is None:
                return True  # another worker took the run between our claim and our lease
            if lease.taken_over_from:
                log.warning("took run %s over from %s (fence %d)", call.run_id,
                            lease.taken_over_from, lease.fence)
            with continuing(call.traceparent, f"dispatch {call.tool_name}",
                            **{"intentledger.logical_call_id": str(call.logical_call_id),
                               "intentledger.state": str(call.state)}):
                report = await self._stepper.step(uow, call, lease, now)
            await uow.commit()
        for metric, tool in report.observed:
            self._counted.add(metric, tool)
        for item in report.after:
            if isinstance(item, HttpWork):
                await self._perform(item)
            else:
                await faults.hit(CRASH_POINTS[item])
        return True

    async def _perform(self, work: HttpWork) -> None:
        await faults.hit("dispatcher.before_send")  # a slow or paused worker, for fencing tests
        with continuing(work.traceparent, f"{work.order.kind} {work.order.tool.name}"):
            outcome = await self._http.perform(work.order)
        await faults.hit("dispatcher.after_send_before_record")
        # A database hiccup must not throw a known answer away: it would turn into UNKNOWN.
        async for attempt in dependency_backoff(give_up_after_s=RECORD_PATIENCE_S):
            with attempt:
                await self._record(work, outcome)

    async def _record(self, work: HttpWork, outcome: Outcome) -> None:
        """The outcome of an HTTP attempt, written only if the run is still ours. Locks the
        call before the lease, in the same order as a step, so the two cannot deadlock."""
        order, lease = work.order, work.lease
        async with UnitOfWork(self._pool, repo.SCHEMA) as uow:
            conn = uow.connection
            now: datetime = await conn.fetchval("SELECT clock_timestamp()")
            dependency = dependency_of(order.tool)
            if outcome.status in _CONFIRMED or outcome.status == "stale":
                self._breakers.succeeded(dependency)
            else:
                self._breakers.failed(dependency, now)
            call = await repo.call_for_update(conn, order.logical_call_id)
            current = await leases.still_holds(conn, lease)
            if current is None:
                receipt = {"status": outcome.status, "result": outcome.result,
                           "reason": outcome.reason, "receipt_id": outcome.receipt_id,
                           "replayed": outcome.replayed,
                           "settled_by_attempt": outcome.settled_by_attempt}
                if await repo.finish_attempt(conn, order.logical_call_id, order.attempt,
                                             outcome.status, outcome.detail, receipt):
                    due = now + backoff(order.attempt) if outcome.status == "transient" else now
                    await repo.postpone(conn, call, due)
                    await conn.execute(f"SELECT pg_notify('{repo.NOTIFY_CHANNEL}', '')")
                    await uow.commit()
                return
        log.warning("run %s: fence %d is stale (now %s); %s of attempt %d not recorded",
                    lease.run_id, lease.fence, current, outcome.status, order.attempt)
        await leases.record_stale_write(self._pool, lease, current,
                                        f"record {outcome.status} of attempt {order.attempt}: "
                                        f"{json.dumps(outcome.detail)}")
        self._counted.add(STALE_WRITE, order.tool.name)
