"""The next step of a call, taken in the transaction of the record that made it due.

A receipt used to be recorded in one transaction and its call settled in a second, by the
scheduler, after a NOTIFY, a claim and a lease (and an authorization likewise became an intent
only two transactions later). Here the consumer collects the calls its batch made due and, once
every record of the batch is applied, steps them under their runs' leases before the batch
commits: receipt, settlement and the events announcing it are one transaction; an
authorization, its recorded intent, attempt 1 and its request in the outbox are one (the relay
publishes the request only once that transaction has committed, so nothing is sent before the
intent is durable: ``decide/forward.py``).

Only calls of Kafka tools are stepped here: their steps never call out, so the consumer never
waits on a downstream. A call of an HTTP tool, a second call of a run already stepped in this
batch, or a call whose run another worker holds is woken for the scheduler instead, as before.
So is a call whose step failed here for a reason of its own: the failure aborts the consumer's
transaction, the consumer applies the batch again a record at a time, and this time the calls
are left to the scheduler, which steps a failing call alone (``batch.py``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from functools import partial
from weakref import WeakKeyDictionary, ref

from services.dispatcher import due, repository as repo
from services.dispatcher.batch import Batch, committed
from services.dispatcher.metrics import DispatcherMetrics
from shared.db.unit_of_work import UnitOfWork
from shared.errors import is_retryable
from shared.tools import ToolSpec

log = logging.getLogger(__name__)


class Finishing:
    def __init__(self, batch: Batch, tool_of: Callable[[repo.Call], ToolSpec | None],
                 counted: DispatcherMetrics) -> None:
        self._batch = batch
        self._tool_of = tool_of
        self._counted = counted
        self._woken: WeakKeyDictionary[UnitOfWork, _Woken] = WeakKeyDictionary()
        self._handed_over: set[uuid.UUID] = set()
        """Calls whose step failed in a consumer's transaction: the scheduler's next time."""

    def step_before_commit(self, uow: UnitOfWork, logical_call_id: uuid.UUID) -> None:
        """Take the call's next step before ``uow`` commits (or wake it for the scheduler)."""
        woken = self._woken.get(uow)
        if woken is None:
            woken = self._woken[uow] = _Woken(self, uow)
        woken.ids.add(logical_call_id)
        # Registered again on every call: a savepoint rolled back (the consumer isolating a bad
        # record) drops the hooks registered inside it, and the unit of work keeps one copy.
        uow.before_commit(woken.finish)

    async def finish(self, uow: UnitOfWork, ids: set[uuid.UUID]) -> None:
        conn = uow.connection
        now, waiting = await due.waiting_calls_for_update(conn, list(ids), self._batch.lease_ttl_s)
        mine, left, runs = [], [], set()
        for call in waiting:
            tool = self._tool_of(call)
            if (tool is None or tool.adapter != "kafka" or call.run in runs
                    or call.logical_call_id in self._handed_over):
                self._handed_over.discard(call.logical_call_id)
                left.append(call)
            else:
                runs.add(call.run)
                mine.append(call)
        reports, busy = [], []
        try:
            if mine:
                reports, busy = await self._batch.step(uow, mine, now, isolate=False)
        except Exception as error:
            if not is_retryable(error):
                # The consumer applies the batch again, a record at a time, to find a bad
                # record; these calls then go to the scheduler, which isolates a bad step.
                log.warning("dispatcher: finishing a batch's calls failed (%s); handing them "
                            "to the scheduler", error)
                self._handed_over.update(call.logical_call_id for call in mine)
            raise
        if mine or left:
            await due.wake_due(conn, [call.logical_call_id for call in left + busy],
                                [call.logical_call_id for call in mine])
        if reports:
            uow.after_commit(partial(committed, reports, self._counted))


class _Woken:
    """The calls one transaction made due (its unit of work is referred to weakly: it is the
    key this is kept under)."""

    def __init__(self, finishing: Finishing, uow: UnitOfWork) -> None:
        self.ids: set[uuid.UUID] = set()
        self._finishing = finishing
        self._uow = ref(uow)

    async def finish(self) -> None:
        uow = self._uow()
        if uow is not None:  # always, while its commit runs this
            await self._finishing.finish(uow, self.ids)
