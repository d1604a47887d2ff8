"""The loop that takes steps: claim due calls, step them in one transaction (``batch.py``),
commit, then do what must happen outside the transaction (crash points, HTTP calls, recording
their outcome).

A call a Kafka receipt or an authorization made due is usually stepped by the consumer that
recorded it, in that record's transaction (``finishing.py``); the scheduler takes the rest:
sends, deadlines, backoffs, reconciliation, HTTP tools, and any call whose run was busy.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from datetime import datetime

import asyncpg

from services.dispatcher import attempts, due, leases, repository as repo
from services.dispatcher.adapters.http import HttpEffectAdapter
from services.dispatcher.adapters.orders import Outcome
from services.dispatcher.batch import Batch, committed
from services.dispatcher.breaker import Breakers
from services.dispatcher.metrics import STALE_WRITE, DispatcherMetrics
from services.dispatcher.retry_budget import backoff
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.steps import HttpWork, StepReport, dependency_of
from shared import faults
from shared.db.unit_of_work import UnitOfWork
from shared.db.wakeup import Wakeup
from shared.errors import is_retryable
from shared.retry import backoff_delay, dependency_backoff
from shared.tracing import continuing

log = logging.getLogger(__name__)

_CONFIRMED = frozenset({"applied", "rejected", "not_found"})
RECORD_PATIENCE_S = 30.0


class Scheduler:
    def __init__(self, pool: asyncpg.Pool, batch: Batch, breakers: Breakers,
                 http: HttpEffectAdapter, settings: DispatcherSettings,
                 counted: DispatcherMetrics) -> None:
        self._pool = pool
        self._counted = counted
        self._batch = batch
        self._breakers = breakers
        self._http = http
        self._settings = settings

    async def run(self, wakeup: Wakeup, stopping: asyncio.Event) -> None:
        """``concurrency`` loops, each stepping batches of due calls until nothing is due.

        A NOTIFY wakes one idle loop, not all of them: a loop that claims a full batch wakes
        the next before stepping it, so loops join one by one while there is more work than
        one batch, and a wake-up costs one claim instead of ``concurrency``. A loop that found
        work claims again at once (the other calls of the runs it stepped are due after its
        commit)."""
        turns = _Turns()
        await asyncio.gather(self._relay_wakeups(wakeup, turns, stopping),
                             *(self._loop(turns, stopping)
                               for _ in range(self._settings.concurrency)))

    async def _relay_wakeups(self, wakeup: Wakeup, turns: _Turns, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            await wakeup.wait(self._settings.scan_interval_s)
            turns.give()
        turns.close()

    async def _loop(self, turns: _Turns, stopping: asyncio.Event) -> None:
        failures = 0
        while not stopping.is_set():
            try:
                found = await self.step_batch(on_claim=turns.give)
                failures = 0
            except Exception as error:
                failures += 1
                log.log(logging.WARNING if is_retryable(error) else logging.ERROR,
                        "dispatcher step failed (%s); retrying", error,
                        exc_info=not is_retryable(error))
                await asyncio.sleep(backoff_delay(failures))
                continue
            if not found:
                await turns.take(self._settings.scan_interval_s * self._settings.concurrency)

    async def step_batch(self, on_claim: Callable[[], None] = lambda: None) -> int:
        """Step the due calls one transaction takes; returns how many were claimed (0: none is
        due for this worker). ``on_claim`` is told as soon as a full batch is claimed."""
        try:
            claimed, reports = await self._step_batch(on_claim, isolate=False)
        except Exception as error:
            if is_retryable(error):
                raise
            log.warning("dispatcher: a batch of steps failed (%s); stepping it call by call",
                        error)
            claimed, reports = await self._step_batch(on_claim, isolate=True)
        await committed(reports, self._counted, self._perform)
        return claimed

    async def _step_batch(self, on_claim: Callable[[], None],
                          isolate: bool) -> tuple[int, list[StepReport]]:
        """The batch's transaction; returns how many calls it claimed and the reports of the
        steps it committed."""
        async with UnitOfWork(self._pool, repo.SCHEMA) as uow:
            now = await due.clock(uow.connection, self._settings.lease_ttl_s)
            calls = await due.claim_due(uow.connection, self._settings.worker_id, now,
                                         self._settings.steps_per_transaction)
            if not calls:
                return 0, []
            if len(calls) == self._settings.steps_per_transaction:
                on_claim()  # more may be due than one batch takes
            reports, _ = await self._batch.step(uow, calls, now, isolate=isolate)
            await uow.commit()
        return len(calls), reports

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
                if await attempts.finish_attempt(conn, attempts.Answer(
                        order.logical_call_id, order.attempt, outcome.status, outcome.detail,
                        receipt)):
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


class _Turns:
    """At most one pending wake-up, taken by one idle loop."""

    def __init__(self) -> None:
        self._pending: asyncio.Queue[None] = asyncio.Queue(maxsize=1)
        self._closed = False

    def close(self) -> None:
        """The dispatcher is stopping: every idle loop returns now, each passing the wake-up
        on to the next, instead of after its idle wait (``scan_interval_s`` × ``concurrency``,
        4 s by default), which a stopping process would otherwise spend doing nothing."""
        self._closed = True
        self.give()

    def give(self) -> None:
        try:
            self._pending.put_nowait(None)
        except asyncio.QueueFull:
            pass  # a loop is already on its way

    async def take(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._pending.get(), timeout)
        except TimeoutError:
            return
        if self._closed:
            self.give()
