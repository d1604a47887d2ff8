"""Stepping a set of calls, at most one per run, inside a transaction someone else owns: the
scheduler's (calls it claimed as due) or the consumer's (calls a receipt or an authorization
just made due, stepped before that record's transaction commits: ``finishing.py``).

What the steps read first (leases, runs, attempts, pending resolutions) is read for the whole
set, a statement each; leases and runs are locked in run order, so two batches wait for each
other instead of deadlocking. A step that fails for a reason of its own (a bug, a lost race)
fails the set, which is then stepped again with a savepoint per call: the failing step is
rolled back alone and retried a moment later, the others commit.

Time comes from PostgreSQL (``clock_timestamp()``), not from this host: leases and deadlines
are compared by one clock however many replicas run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

import asyncpg

from services.dispatcher import leases, repository as repo
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.steps import Known, StepReport, Stepper
from shared.db.unit_of_work import UnitOfWork
from shared.errors import is_retryable
from shared.tracing import continuing

log = logging.getLogger(__name__)

FAILED_STEP_RETRY_S = 1.0
CRASH_POINTS = {
    "intent_recorded": "dispatcher.after_intent_before_send",
    "sent": "dispatcher.after_send_before_record",
    "compensation_requested": "dispatcher.mid_compensation",
}
"""Where a step's ``CrashPoint`` fires, once its transaction has committed."""


class Batch:
    def __init__(self, stepper: Stepper, settings: DispatcherSettings) -> None:
        self._stepper = stepper
        self._settings = settings

    async def clock(self, conn: asyncpg.Connection) -> datetime:
        """The transaction's ``now``, and its guard: a worker paused inside a step (SIGSTOP, a
        long GC) must not keep the run's rows locked past its lease, so PostgreSQL ends the
        session, the step rolls back, and another worker takes the run over with the next
        fence."""
        return await conn.fetchval(
            "SELECT clock_timestamp() FROM (SELECT set_config('lock_timeout', '5s', true),"
            " set_config('idle_in_transaction_session_timeout', $1, true)) AS local_settings",
            f"{int(self._settings.lease_ttl_s * 1000)}ms")

    async def step(self, uow: UnitOfWork, calls: Sequence[repo.Call], now: datetime, *,
                   isolate: bool) -> tuple[list[StepReport], list[repo.Call]]:
        """Step ``calls`` (at most one per run, locked by the caller); returns the reports of
        the steps taken and the calls left unstepped because another worker holds their run."""
        run_keys = sorted({call.run for call in calls})
        call_ids = [call.logical_call_id for call in calls]
        conn = uow.connection
        held = await leases.hold(conn, run_keys, self._settings.worker_id,
                                 self._settings.lease_ttl_s, now)
        runs = await repo.runs_for_update(conn, list(held))
        attempts = await repo.attempts_of(conn, call_ids)
        resolutions = await repo.pending_resolutions(conn, call_ids)
        reports, left = [], []
        for call in sorted(calls, key=lambda call: call.run):
            if (lease := held.get(call.run)) is None:
                left.append(call)  # another worker holds the run, or is stepping it
                continue
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
        return reports, left

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
