"""The loop that takes steps: claim due calls, hold their runs' leases, step each, commit, then
do what must happen outside the transaction (crash points, HTTP calls, recording their outcome).

Many calls are stepped in one transaction, at most one per run. A step that fails for a reason
of its own (a bug, a lost race) fails the batch, which is then stepped again with a savepoint
per call: the failing step is rolled back alone and retried a moment later, the others commit.
What the steps read first (leases, runs, attempts,
pending resolutions) is read for the whole batch, a statement each; leases and runs are locked in
run order, so two loops wait for each other instead of deadlocking.

Time comes from PostgreSQL (``clock_timestamp()``), not from this host: leases and deadlines
are compared by one clock however many replicas run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

import asyncpg

from services.dispatcher import leases, repository as repo
from services.dispatcher.adapters.http import HttpEffectAdapter
from services.dispatcher.adapters.orders import Outcome
from services.dispatcher.breaker import Breakers
from services.dispatcher.metrics import STALE_WRITE, DispatcherMetrics
from services.dispatcher.retry_budget import backoff
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.steps import HttpWork, Known, StepReport, Stepper, dependency_of
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
FAILED_STEP_RETRY_S = 1.0


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
        for report in reports:
            for metric, tool in report.observed:
                self._counted.add(metric, tool)
        outcomes = await asyncio.gather(*(self._after_commit(report) for report in reports),
                                        return_exceptions=True)
        if failed := next((outcome for outcome in outcomes if isinstance(outcome, BaseException)),
                          None):
            raise failed
        return claimed

    async def _step_batch(self, on_claim: Callable[[], None],
                          isolate: bool) -> tuple[int, list[StepReport]]:
        """The batch's transaction; returns how many calls it claimed and the reports of the
        steps it committed."""
        async with UnitOfWork(self._pool, repo.SCHEMA) as uow:
            conn = uow.connection
            # A worker paused inside a step (SIGSTOP, a long GC) must not keep the run's rows
            # locked past its lease: PostgreSQL ends the session, the step rolls back, and
            # another worker takes the run over with the next fence.
            now: datetime = await conn.fetchval(
                "SELECT clock_timestamp() FROM (SELECT set_config('lock_timeout', '5s', true),"
                " set_config('idle_in_transaction_session_timeout', $1, true)) AS local_settings",
                f"{int(self._settings.lease_ttl_s * 1000)}ms")
            calls = await repo.claim_due(conn, self._settings.worker_id, now,
                                         self._settings.steps_per_transaction)
            if not calls:
                return 0, []
            if len(calls) == self._settings.steps_per_transaction:
                on_claim()  # more may be due than one batch takes
            run_keys = sorted({call.run for call in calls})
            call_ids = [call.logical_call_id for call in calls]
            held = await leases.hold(conn, run_keys, self._settings.worker_id,
                                     self._settings.lease_ttl_s, now)
            runs = await repo.runs_for_update(conn, list(held))
            attempts = await repo.attempts_of(conn, call_ids)
            resolutions = await repo.pending_resolutions(conn, call_ids)
            reports = []
            for call in sorted(calls, key=lambda call: call.run):
                if (lease := held.get(call.run)) is None:
                    continue  # another worker took the run between our claim and our lease
                if lease.taken_over_from:
                    log.warning("took run %s over from %s (fence %d)", call.run,
                                lease.taken_over_from, lease.fence)
                known = Known(runs[call.run], attempts[call.logical_call_id],
                              resolutions.get(call.logical_call_id))
                if isolate:
                    report = await self._step_isolated(uow, call, lease, now, known)
                else:
                    report = await self._step(uow, call, lease, now, known)
                if report is not None:
                    reports.append(report)
            await uow.commit()
        return len(calls), reports

    async def _step(self, uow: UnitOfWork, call: repo.Call, lease: leases.Lease,
                    now: datetime, known: Known) -> StepReport:
        with continuing(call.traceparent, f"dispatch {call.tool_name}",
                        **{"intentledger.logical_call_id": str(call.logical_call_id),
                           "intentledger.state": str(call.state)}):
            return await self._stepper.step(uow, call, lease, now, known)

    async def _step_isolated(self, uow: UnitOfWork, call: repo.Call, lease: leases.Lease,
                             now: datetime, known: Known) -> StepReport | None:
        try:
            async with uow.savepoint():
                return await self._step(uow, call, lease, now, known)
        except Exception as error:
            if is_retryable(error):
                raise  # the transaction itself is in doubt: the whole batch is retried
            log.exception("dispatcher: stepping call %s (%s) failed; retrying it in %.0f s",
                          call.logical_call_id, call.state, FAILED_STEP_RETRY_S)
            await repo.postpone(uow.connection, call, now + timedelta(seconds=FAILED_STEP_RETRY_S))
            return None

    async def _after_commit(self, report: StepReport) -> None:
        for item in report.after:
            if isinstance(item, HttpWork):
                await self._perform(item)
            else:
                await faults.hit(CRASH_POINTS[item])

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


class _Turns:
    """At most one pending wake-up, taken by one idle loop."""

    def __init__(self) -> None:
        self._pending: asyncio.Queue[None] = asyncio.Queue(maxsize=1)

    def give(self) -> None:
        try:
            self._pending.put_nowait(None)
        except asyncio.QueueFull:
            pass  # a loop is already on its way

    async def take(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._pending.get(), timeout)
        except TimeoutError:
            pass
