"""Stepping a set of calls, at most one per run, inside a transaction someone else owns: the
scheduler's (calls it claimed as due) or the consumer's (calls a receipt or an authorization
just made due, stepped before that record's transaction commits: ``finishing.py``).

What the steps read first is read for the whole set: the leases, then the runs, locked in run
order, so two batches wait for each other instead of deadlocking, with the attempts, pending
resolutions and the slots of bounded tools in the same statement (``reads.py``). What they
write last, their calls' moves and the attempts these start, is one statement for the set
(``moves.py``). Slots the steps freed are handed to the calls in line before the transaction
commits. A step that fails for a reason of its own (a bug, a lost race) fails the set, which
is then stepped again with a savepoint per call: the failing step is rolled back alone,
counted (``step_failures``) and tried again after a backoff that doubles with each
consecutive failure of that call (1 s to 5 min), the others commit. A call no step can take
(a bug, a row written by hand) therefore costs a few steps an hour, not one a second.

Time comes from PostgreSQL (``clock_timestamp()``, read with the transaction's guard before
the set was locked: ``due.GUARD``), not from this host: leases and deadlines are compared by
one clock however many replicas run.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

from services.dispatcher import capacity, leases, metrics, moves, reads, repository as repo
from services.dispatcher.metrics import DispatcherMetrics
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.steps import HttpWork, Known, StepReport, Stepper
from shared import faults
from shared.db.unit_of_work import UnitOfWork
from shared.errors import is_retryable
from shared.tracing import continuing

log = logging.getLogger(__name__)

FAILED_STEP_RETRY_S = 1.0
FAILED_STEP_RETRY_MAX_S = 300.0
FAILING_CALLS_KEPT = 10_000
"""How many failing calls' consecutive failures are remembered (the oldest are forgotten)."""
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
        self._failures: dict[uuid.UUID, int] = {}
        """Consecutive failed steps of each failing call, in this process."""

    @property
    def lease_ttl_s(self) -> float:
        """How long a stepping transaction may sit idle holding its runs (``due.GUARD``)."""
        return self._settings.lease_ttl_s

    async def step(self, uow: UnitOfWork, calls: Sequence[repo.Call], now: datetime, *,
                   isolate: bool) -> tuple[list[StepReport], list[repo.Call]]:
        """Step ``calls`` (at most one per run, locked by the caller); returns the reports of
        the steps taken and the calls left unstepped because another worker holds their run."""
        run_keys = sorted({call.run for call in calls})
        call_ids = [call.logical_call_id for call in calls]
        conn = uow.connection
        held = await leases.hold(conn, run_keys, self._settings.worker_id,
                                 self._settings.lease_ttl_s, now)
        read = await reads.step_reads(conn, list(held), call_ids, self._bounds(calls))
        reports, left = [], []
        for call in sorted(calls, key=lambda call: call.run):
            if (lease := held.get(call.run)) is None:
                left.append(call)  # another worker holds the run, or is stepping it
                continue
            if lease.taken_over_from:
                log.warning("took run %s over from %s (fence %d)", call.run,
                            lease.taken_over_from, lease.fence)
            known = Known(read.runs[call.run], read.attempts[call.logical_call_id],
                          read.pending.get(call.logical_call_id), read.slots)
            if isolate:
                reports.append(await self._step_isolated(uow, call, lease, now, known))
            else:
                reports.append(await self._step(uow, call, lease, now, known))
        # The steps' last moves, one statement for the set (those written already are skipped).
        await moves.write(conn, [report.moves for report in reports if report.moves is not None])
        await capacity.admit(conn, read.slots.with_line())  # slots the steps freed go to the line
        return reports, left

    def _bounds(self, calls: Sequence[repo.Call]) -> dict[str, int]:
        tools = (self._stepper.tool_of(call) for call in calls)
        return capacity.bounds_of((tool.name, tool.max_in_flight) for tool in tools
                                  if tool is not None)

    async def _step(self, uow: UnitOfWork, call: repo.Call, lease: leases.Lease,
                    now: datetime, known: Known) -> StepReport:
        with continuing(call.traceparent, f"dispatch {call.tool_name}",
                        **{"intentledger.logical_call_id": str(call.logical_call_id),
                           "intentledger.state": str(call.state)}):
            report = await self._stepper.step(uow, call, lease, now, known)
        self._failures.pop(call.logical_call_id, None)
        return report

    async def _step_isolated(self, uow: UnitOfWork, call: repo.Call, lease: leases.Lease,
                             now: datetime, known: Known) -> StepReport:
        try:
            async with uow.savepoint():
                report = await self._step(uow, call, lease, now, known)
                if report.moves is not None:
                    await moves.write(uow.connection, [report.moves])  # inside its savepoint
        except Exception as error:
            if is_retryable(error):
                raise  # the transaction itself is in doubt: the whole batch is retried
            failures = self._failed(call.logical_call_id)
            delay = min(FAILED_STEP_RETRY_S * 2 ** (failures - 1), FAILED_STEP_RETRY_MAX_S)
            log.exception("dispatcher: stepping call %s (%s) failed (%d in a row); trying it "
                          "again in %.0f s", call.logical_call_id, call.state, failures, delay)
            await repo.postpone(uow.connection, call, now + timedelta(seconds=delay))
            return StepReport([], [(metrics.STEP_FAILURE, call.tool_name)])
        return report

    def _failed(self, logical_call_id: uuid.UUID) -> int:
        failures = self._failures.pop(logical_call_id, 0) + 1
        self._failures[logical_call_id] = failures  # the most recent last
        if len(self._failures) > FAILING_CALLS_KEPT:
            del self._failures[next(iter(self._failures))]
        return failures


async def committed(reports: list[StepReport], counted: DispatcherMetrics,
                    perform: Callable[[HttpWork], Awaitable[None]] | None = None) -> None:
    """What the steps of a committed transaction asked for: their metrics counted, their crash
    points passed, their HTTP attempts made by ``perform`` (the scheduler's; a consumer's steps
    are of Kafka tools, which ask for none), one report's after another's concurrently."""
    for report in reports:
        for metric, tool in report.observed:
            counted.add(metric, tool)
    outcomes = await asyncio.gather(*(_after(report, perform) for report in reports),
                                    return_exceptions=True)
    if failed := next((outcome for outcome in outcomes if isinstance(outcome, BaseException)),
                      None):
        raise failed


async def _after(report: StepReport,
                 perform: Callable[[HttpWork], Awaitable[None]] | None) -> None:
    for item in report.after:
        if isinstance(item, str):
            await faults.hit(CRASH_POINTS[item])
        elif perform is None:
            raise TypeError(f"a Kafka tool's step asked for {item!r}")
        else:
            await perform(item)
