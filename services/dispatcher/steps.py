"""One step of one call's life (docs/design.md §4), taken under the run's lease in one transaction.

Kafka consumers only record facts (an authorization arrived, a receipt answered attempt n);
every decision — record the intent, send, retry, call an outcome UNKNOWN, reconcile, settle,
compensate — is taken here, by the worker holding the run's lease, with the fence stamped on
the transition and on every request. A step returns what must happen after its commit: a
crash point, or an HTTP call (which must never run inside a transaction: the attempt is
recorded first, the outcome in a second transaction that re-checks the fence).

The rules that make a lost response safe:
- an attempt is recorded before it is sent (the Kafka request is an outbox row of the same
  transaction); the intent before any attempt;
- no answer by the attempt deadline, or a response lost with its worker, is UNKNOWN, and
  UNKNOWN leaves only through evidence: a lookup by key, a replay under the same key where the
  tool deduplicates (inside its key-retention window), or a person;
- a lookup is sent only after every earlier attempt's deadline, so an older request still in
  flight cannot land after "not found" (downstreams also refuse expired requests and, where they
  check fences, anything older than the lookup's fence).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from services.dispatcher import events, leases, metrics, repository as repo
from services.dispatcher.adapters import kafka
from services.dispatcher.adapters.orders import Order
from services.dispatcher.authority import PolicyView, Refusal, refusal_at_dispatch
from services.dispatcher.breaker import Breakers
from services.dispatcher.compensations import NoCompensation, Proposer, intent_for
from services.dispatcher.repository import Attempt, Call, Run
from services.dispatcher.results import parsed_result
from services.dispatcher.retry_budget import attempt_deadline, attempts_exhausted
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.states import CALL_TRANSITIONS
from shared.capabilities import PublicKeys
from shared.contracts.compensations import COMPENSATION_PROPOSED, CompensationProposal
from shared.contracts.intake import Intent
from shared.contracts.resolutions import Resolution
from shared.contracts.dispatch import (COMPENSATION_REQUESTED, COMPENSATION_SETTLED,
                                       DISPATCH_INTENT_RECORDED, DISPATCH_REFUSED,
                                       MANUAL_REVIEW_REQUIRED, RUN_ABORTED, TOOL_ATTEMPT_STARTED,
                                       TOOL_EFFECT_RECONCILED, TOOL_OUTCOME_MARKED_UNKNOWN,
                                       TOOL_OUTCOME_RESOLVED,
                                       TOOL_RESULT_RECORDED, CallState, DispatchReason)
from shared.db.unit_of_work import UnitOfWork
from shared.messaging.envelope import Envelope
from shared.tools import Rejection, ToolRegistry, ToolSpec
from shared.tracing import current_traceparent

log = logging.getLogger(__name__)
S = CallState

AfterCommit = Literal["intent_recorded", "sent", "compensation_requested"]
STOPS_WITHOUT_UNDOING = frozenset({DispatchReason.RUN_ATTEMPT_BUDGET_EXHAUSTED,
                                   DispatchReason.RUN_DEADLINE_PASSED})
"""Why a run may stop without its done steps being compensated: it ran out of attempts or time,
and what it did is what it was asked to do."""
DEADLINE_PASSED = "deadline_passed"
"""A downstream's refusal of a request that arrived after its deadline, key left unsettled."""


@dataclass(frozen=True)
class HttpWork:
    """An HTTP attempt recorded in the step's transaction, to perform after its commit."""

    order: Order
    lease: leases.Lease
    traceparent: str | None


@dataclass
class _Step:
    uow: UnitOfWork
    call: Call
    run: Run
    lease: leases.Lease
    tool: ToolSpec
    attempts: list[Attempt]
    now: datetime
    after: list[AfterCommit | HttpWork]
    observed: list[tuple[str, str]]
    """(metric, tool) to count once the step's transaction has committed."""

    @property
    def conn(self):
        return self.uow.connection

    @property
    def latest(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    def count(self, metric: str, call: Call | None = None) -> None:
        self.observed.append((metric, (call or self.call).tool_name))


@dataclass(frozen=True)
class Known:
    """What a step reads before deciding, fetched for a whole batch of calls at once."""

    run: Run
    attempts: list[Attempt]
    resolution: tuple[uuid.UUID, dict[str, Any]] | None


@dataclass(frozen=True)
class StepReport:
    after: list[AfterCommit | HttpWork]
    observed: list[tuple[str, str]]


def _producer_of(step: _Step, proof: Attempt) -> Attempt:
    """The attempt that applied the effect: the one a replayed receipt names, else the one that
    got the answer (docs/design.md §5.11: the audit names who did it, not who asked afterwards)."""
    settled_by = (proof.receipt or {}).get("settled_by_attempt")
    return next((attempt for attempt in step.attempts if attempt.attempt == settled_by), proof)


def dependency_of(tool: ToolSpec) -> str:
    """What a circuit breaker guards: the endpoint, shared by every tool behind it."""
    return tool.http_url if tool.adapter == "http" else f"kafka:{tool.topic}"


class Stepper:
    def __init__(self, registry: ToolRegistry, policy: PolicyView, breakers: Breakers,
                 settings: DispatcherSettings, keys: PublicKeys, proposer: Proposer | None) -> None:
        """``proposer``: how this dispatcher proposes compensations (None: it cannot)."""
        self._registry = registry
        self._proposer = proposer
        self._policy = policy
        self._breakers = breakers
        self._settings = settings
        self._keys = keys
        self._events = events.Recorder(settings.dispatch_topic, settings.effects_topic)

    def tool_of(self, call: Call) -> ToolSpec | None:
        try:
            return self._registry.resolve(call.tool_name, call.tool_version)
        except Rejection:
            return None

    async def step(self, uow: UnitOfWork, call: Call, lease: leases.Lease, now: datetime,
                   known: Known) -> StepReport:
        """``known``: the call's run, attempts and pending resolution, read (and locked) in this
        transaction for the whole batch it belongs to."""
        conn = uow.connection
        tool = self.tool_of(call)
        step = _Step(uow, call, known.run, lease, tool, known.attempts, now, [], [])
        if known.resolution is not None:
            if await self._resolve(step, *known.resolution):
                return StepReport(step.after, step.observed)
        if tool is None:
            await self._unregistered_tool(step)
        elif call.state == S.AUTHORIZED:
            await self._record_intent(step)
        elif call.state == S.INTENT_RECORDED:
            await self._send(step, to=S.DISPATCHING)
        elif call.state == S.DISPATCHING:
            await self._after_attempt(step)
        elif call.state == S.UNKNOWN:
            await self._reconcile(step)
        elif call.state == S.RECONCILING:
            await self._after_reconciliation(step)
        else:
            await repo.postpone(conn, call, None)  # settled, or waiting for its compensation
        return StepReport(step.after, step.observed)

    # -- forward path ---------------------------------------------------------------------

    async def _record_intent(self, step: _Step) -> None:
        """Invariant 1: the intent is durable before anything can be sent."""
        call = step.call
        if (call.compensates is not None and call.capability is None
                and call.policy_refusal is None and step.now < call.deadline_at):
            await repo.postpone(step.conn, call, call.deadline_at)  # the policy has not answered
            return
        if refusal := self._refusal(step):
            await self._refuse(step, refusal)
            return
        version = await self._move(step, S.INTENT_RECORDED, next_action_at=step.now)
        self._events.call_event(step.uow, DISPATCH_INTENT_RECORDED, step.call, step.lease,
                          state=S.INTENT_RECORDED, version=version)
        step.count(metrics.INTENT)
        step.after.append("intent_recorded")

    async def _send(self, step: _Step, *, to: CallState) -> None:
        """A send attempt under the operation key, if authority, budgets, time and the
        dependency's breaker all allow it now."""
        call, tool, now = step.call, step.tool, step.now
        replaying = to == S.RECONCILING
        if refusal := self._refusal(step) or self._budget_refusal(step):
            if replaying:
                await self._manual(step, DispatchReason.NO_RECONCILIATION_PATH,
                                   f"the outcome is unknown and a replay is not allowed: "
                                   f"{refusal.detail}")
            elif call.state == S.RECONCILING or step.attempts:
                # Every earlier attempt is confirmed not applied; none may follow.
                await self._fail(step, step.latest, refusal.reason, refusal.detail)
            else:
                await self._refuse(step, refusal)
            return
        deadline = attempt_deadline(now, tool.retry.attempt_timeout_seconds, call.deadline_at,
                                    self._settings.recovery_reserve_s)
        if (until := self._breakers.closed_at(dependency_of(tool), now)) is not None:
            await repo.postpone(step.conn, call, min(until, deadline))
            return
        await self._attempt(step, "send", deadline, to)

    def _budget_refusal(self, step: _Step) -> Refusal | None:
        call, run, tool = step.call, step.run, step.tool
        sent = sum(1 for attempt in step.attempts if attempt.kind == "send")
        if attempts_exhausted(sent, tool.retry.max_attempts):
            return Refusal(S.DENIED, DispatchReason.CALL_ATTEMPT_BUDGET_EXHAUSTED,
                           f"{sent} of the tool's {tool.retry.max_attempts} attempts used")
        if call.compensates is None and run.attempts_used >= run.max_attempts:
            return Refusal(S.DENIED, DispatchReason.RUN_ATTEMPT_BUDGET_EXHAUSTED,
                           f"the run has used its {run.max_attempts} attempts")
        remaining = (call.deadline_at - timedelta(seconds=self._settings.recovery_reserve_s)
                     - step.now).total_seconds()
        if remaining < self._settings.min_attempt_s:
            return Refusal(S.EXPIRED, DispatchReason.RUN_DEADLINE_PASSED,
                           f"{max(remaining, 0):.1f} s left before the recovery reserve")
        return None

    async def _attempt(self, step: _Step, kind: Literal["send", "lookup"], deadline: datetime,
                       to: CallState) -> None:
        call, lease = step.call, step.lease
        number = call.attempts + 1
        await repo.insert_attempt(step.conn, call, number, kind, lease.fence, lease.owner_id, deadline)
        attempt = Attempt(number, kind, lease.fence, lease.owner_id, step.now, deadline, None, None,
                          None, None)
        version = await self._move(step, to, next_action_at=deadline)
        self._events.call_event(step.uow, TOOL_ATTEMPT_STARTED, call, lease, state=to, version=version,
                          attempt=attempt, detail=f"until {deadline.isoformat()}")
        step.count(metrics.ATTEMPT_SENT if kind == "send" else metrics.ATTEMPT_LOOKUP)
        if kind == "send" and step.tool.requires_approval and not (call.capability or {}).get(
                "approvals"):
            step.count(metrics.IRREVERSIBLE_UNAPPROVED)  # authority_at_dispatch forbids it
        order = Order(kind=kind, tool=step.tool, run_id=call.run_id, tenant_id=call.tenant_id,
                      logical_call_id=call.logical_call_id, operation_key=call.operation_key,
                      canonical_arguments=call.canonical_arguments, attempt=number,
                      fence=lease.fence, deadline_at=deadline,
                      capability=call.capability if kind == "send" else None)
        if step.tool.adapter == "http":
            await leases.cover(step.conn, lease, deadline)
            step.after.append(HttpWork(order, lease, call.traceparent))
        else:
            kafka.request(step.uow, order, self._settings.reply_topic)
            step.after.append("sent")

    async def _after_attempt(self, step: _Step) -> None:
        latest = step.latest
        if latest.status is None:
            if await self._record_if_unanswerable(step, latest):
                await self._mark_unknown(step, latest)
            return
        reason = (latest.receipt or {}).get("reason")
        if latest.status == "applied":
            await self._succeed(step, latest, reconciled=False)
        elif latest.status == "rejected" and reason == DEADLINE_PASSED:
            # Delivered after its own deadline and refused unsettled: nothing was applied, and
            # the run may still have time for another attempt under the same key.
            await self._send(step, to=S.DISPATCHING)
        elif latest.status in ("rejected", "refused"):
            await self._fail(step, latest, DispatchReason.REJECTED_BY_TOOL,
                             f"{latest.detail}: {reason}")
        elif latest.status == "transient":  # confirmed not applied; its backoff has passed
            await self._send(step, to=S.DISPATCHING)
        else:  # unknown, stale, or an answer that does not fit a send
            await self._mark_unknown(step, latest)

    async def _record_if_unanswerable(self, step: _Step, latest: Attempt) -> bool:
        """True after recording an unanswered attempt as unknown, once its answer can no longer
        come: its deadline passed, or it was an HTTP call whose worker lost the run (the
        response lived only in that worker's memory). Otherwise postpone to its deadline."""
        lost = step.tool.adapter == "http" and latest.fence < step.lease.fence
        if not lost and step.now < latest.deadline_at:
            await repo.postpone(step.conn, step.call, latest.deadline_at)
            return False
        detail = ("its worker lost the run before recording the response" if lost
                  else "no answer by the attempt deadline")
        await repo.finish_attempt(step.conn, step.call.logical_call_id, latest.attempt, "unknown",
                                  detail, None)
        self._breakers.failed(dependency_of(step.tool), step.now)
        step.attempts[-1] = replace(latest, status="unknown", detail=detail,
                                    finished_at=step.now)
        return True

    async def _mark_unknown(self, step: _Step, latest: Attempt) -> None:
        """Never FAILED after a lost response: nobody knows yet, and the record says so.

        Reconciliation starts only once every earlier attempt's deadline has passed, plus a
        grace for the downstream's clock, so that no request still in flight can land after a
        lookup said "not found". The run's work is extended by the reconciliation window: its
        owner keeps a lease to finish recovery even past the run deadline."""
        settings = self._settings
        last_deadline = max(attempt.deadline_at for attempt in step.attempts)
        not_before = last_deadline + timedelta(seconds=settings.clock_skew_grace_s)
        await repo.extend_work(step.conn, step.call.run,
                               step.now + timedelta(seconds=settings.reconciliation_window_s))
        version = await self._move(step, S.UNKNOWN, next_action_at=max(step.now, not_before))
        self._events.call_event(step.uow, TOOL_OUTCOME_MARKED_UNKNOWN, step.call, step.lease,
                          state=S.UNKNOWN, version=version, attempt=latest, detail=latest.detail)
        step.count(metrics.OUTCOME_UNKNOWN)

    # -- reconciliation -------------------------------------------------------------------

    async def _reconcile(self, step: _Step) -> None:
        tool, call = step.tool, step.call
        if tool.reconciliation == "manual":
            await self._manual(step, DispatchReason.NO_RECONCILIATION_PATH,
                               "the tool offers neither a lookup nor a safe replay")
        elif tool.reconciliation == "lookup_by_key":
            if call.lookups >= self._settings.max_lookups:
                await self._manual(step, DispatchReason.RECONCILIATION_BUDGET_EXHAUSTED,
                                   f"{call.lookups} lookups went unanswered")
            elif (wait_until := self._lookup_not_before(step)) is not None:
                await repo.postpone(step.conn, call, wait_until)
            else:
                deadline = step.now + timedelta(seconds=self._settings.lookup_timeout_s)
                await self._attempt(step, "lookup", deadline, S.RECONCILING)
        elif (why_not := self._replay_refusal(step)) is not None:
            await self._manual(step, DispatchReason.NO_RECONCILIATION_PATH, why_not)
        else:
            await self._send(step, to=S.RECONCILING)

    def _lookup_not_before(self, step: _Step) -> datetime | None:
        """Lookups back off (1, 2, 4 … × the base, from the last one's end) and wait for the
        dependency's breaker, so a downstream that is down for a while does not exhaust the
        reconciliation budget in a second."""
        lookups = [attempt for attempt in step.attempts if attempt.kind == "lookup"]
        not_before = step.now
        if lookups:
            last = lookups[-1]
            pause = self._settings.lookup_backoff_s * 2 ** (len(lookups) - 1)
            not_before = (last.finished_at or last.deadline_at) + timedelta(seconds=pause)
        closed_at = self._breakers.closed_at(dependency_of(step.tool), step.now)
        later = max(not_before, closed_at or step.now)
        return later if later > step.now else None

    def _replay_refusal(self, step: _Step) -> str | None:
        """A replay under the same key is safe only while the downstream still remembers it."""
        retry = step.tool.retry
        first = next(attempt for attempt in step.attempts if attempt.kind == "send")
        if not retry.replay_safe:
            return "the tool does not deduplicate a resend"
        return self._forgotten(step, first)

    def _forgotten(self, step: _Step, first: Attempt) -> str | None:
        """Why a resend under the key could be a new effect (the downstream may have forgotten
        the key by the time it arrives), or None. A tool that declares no retention keeps
        keys for ever."""
        retry = step.tool.retry
        if retry.key_retention_seconds is None:
            return None
        remembered_until = first.started_at + timedelta(seconds=retry.key_retention_seconds)
        if step.now + timedelta(seconds=retry.attempt_timeout_seconds) >= remembered_until:
            return (f"the downstream forgets the key at {remembered_until.isoformat()}: a resend "
                    "could apply the effect again")
        return None

    async def _after_reconciliation(self, step: _Step) -> None:
        latest = step.latest
        if latest.status is None:
            if await self._record_if_unanswerable(step, latest):
                await self._reconcile(step)
            return
        if latest.status == "applied":
            await self._succeed(step, latest, reconciled=True)
        elif latest.status == "rejected":
            await self._fail(step, latest, DispatchReason.REJECTED_BY_TOOL,
                             f"reconciled: {(latest.receipt or {}).get('reason')}", reconciled=True)
        elif latest.status == "not_found":  # confirmed: nothing was applied under the key
            first = next(attempt for attempt in step.attempts if attempt.kind == "send")
            if (forgotten := self._forgotten(step, first)) is not None:
                await self._manual(step, DispatchReason.NO_RECONCILIATION_PATH,
                                   f"not found, but {forgotten}")
            else:
                await self._send(step, to=S.DISPATCHING)
        else:  # unknown, stale, refused, transient: no evidence yet
            await self._reconcile(step)

    # -- endings --------------------------------------------------------------------------

    async def _succeed(self, step: _Step, attempt: Attempt, *, reconciled: bool) -> None:
        receipt = attempt.receipt or {}
        self._breakers.succeeded(dependency_of(step.tool))
        result, problem = parsed_result(step.tool, receipt.get("result"))
        if problem is not None:  # the effect exists, but what it says cannot be trusted
            await self._manual(step, DispatchReason.RESULT_INVALID, problem)
            return
        receipt_id = str(receipt.get("receipt_id"))
        version = await self._move(step, S.SUCCEEDED, next_action_at=None, result=result,
                                   receipt_id=receipt_id, succeeded_at=step.now)
        self._events.call_event(step.uow, TOOL_EFFECT_RECONCILED if reconciled else TOOL_RESULT_RECORDED,
                          step.call, step.lease, state=S.SUCCEEDED, version=version,
                          attempt=attempt, result=result, receipt_id=receipt_id,
                          detail="replayed answer" if receipt.get("replayed") else None)
        self._events.committed_effect(step.uow, step.call, _producer_of(step, attempt), result,
                                receipt_id)
        if reconciled:
            step.count(metrics.RECONCILED)
        await self._after_success(step)

    async def _after_success(self, step: _Step) -> None:
        if step.call.compensates is not None:
            await self._compensation_settled(step, S.COMPENSATED, None)
        else:
            await self._advance_saga(step)  # in an aborted run, this effect is compensated too

    async def _fail(self, step: _Step, attempt: Attempt | None, reason: DispatchReason,
                    detail: str, *, reconciled: bool = False) -> None:
        """Only on evidence that nothing was applied."""
        version = await self._move(step, S.FAILED, next_action_at=None, reason=reason)
        self._events.call_event(step.uow, TOOL_EFFECT_RECONCILED if reconciled else TOOL_RESULT_RECORDED,
                          step.call, step.lease, state=S.FAILED, version=version, attempt=attempt,
                          reason=reason, detail=detail)
        if reconciled:
            step.count(metrics.RECONCILED)
        await self._after_failure(step, reason, detail)

    async def _refuse(self, step: _Step, refusal: Refusal) -> None:
        """No dispatch, and the reason on record."""
        version = await self._move(step, refusal.state, next_action_at=None, reason=refusal.reason)
        self._events.call_event(step.uow, DISPATCH_REFUSED, step.call, step.lease, state=refusal.state,
                          version=version, reason=refusal.reason, detail=refusal.detail)
        if refusal.reason != DispatchReason.RUN_ABORTED:
            await self._after_failure(step, refusal.reason, refusal.detail)

    async def _manual(self, step: _Step, reason: DispatchReason, detail: str) -> None:
        """Escalation with the evidence: every attempt and what it came to is in the events."""
        version = await self._move(step, S.MANUAL_REVIEW, next_action_at=None, reason=reason)
        evidence = "; ".join(f"#{a.attempt} {a.kind} fence {a.fence}: {a.status} ({a.detail})"
                             for a in step.attempts)
        self._events.call_event(step.uow, MANUAL_REVIEW_REQUIRED, step.call, step.lease,
                          state=S.MANUAL_REVIEW, version=version, attempt=step.latest,
                          reason=reason, detail=f"{detail}. Evidence: {evidence or 'no attempts'}")
        step.count(metrics.MANUAL_REVIEW)
        # A compensation whose outcome nobody knows leaves its original COMPENSATING: calling
        # it failed could make a person compensate twice. The saga waits for the resolution.

    async def _unregistered_tool(self, step: _Step) -> None:
        """The registry no longer declares the tool (a redeploy removed it)."""
        refusal = Refusal(S.DENIED, DispatchReason.UNKNOWN_TOOL,
                          f"{step.call.tool_name} v{step.call.tool_version} is not in the registry")
        if step.call.state in (S.AUTHORIZED, S.INTENT_RECORDED):
            await self._refuse(step, refusal)
        elif step.call.state in (S.DISPATCHING, S.UNKNOWN, S.RECONCILING):
            await self._manual(step, refusal.reason, refusal.detail)
        else:
            await repo.postpone(step.conn, step.call, None)

    # -- resolutions -------------------------------------------------------------------

    async def _resolve(self, step: _Step, event_id, request: dict) -> bool:
        """Apply an operator's resolution (``shared/contracts/resolutions.py``), or record why not;
        True when the call was settled by it."""
        resolution = Resolution.model_validate(request)
        refusal, detail, rule, result = self._resolution_refusal(step, resolution)
        if refusal is not None:
            await repo.conclude_resolution(step.conn, event_id, "refused", f"{refusal}: {detail}")
            log.warning("resolution of %s by %s refused: %s", step.call.logical_call_id,
                        resolution.operator_id, detail)
            return False
        succeeded = resolution.outcome == "succeeded"
        to = S.SUCCEEDED if succeeded else S.FAILED
        reason = DispatchReason.RESOLVED_BY_OPERATOR
        version = await self._move(step, to, next_action_at=None, reason=reason, result=result,
                                   receipt_id=resolution.receipt_id,
                                   succeeded_at=step.now if succeeded else None)
        self._events.call_event(step.uow, TOOL_OUTCOME_RESOLVED, step.call, step.lease, state=to,
                          version=version, attempt=step.latest, reason=reason,
                          detail=f"{resolution.reason} (resolution rule {rule})", result=result,
                          receipt_id=resolution.receipt_id, operator_id=resolution.operator_id,
                          evidence=resolution.evidence)
        await repo.conclude_resolution(step.conn, event_id, "applied", None)
        step.count(metrics.RESOLUTION)
        if succeeded:
            self._events.committed_effect(step.uow, step.call, step.latest, result, resolution.receipt_id)
            await self._after_success(step)
        else:
            await self._after_failure(step, reason, resolution.reason)
        return True

    def _resolution_refusal(self, step: _Step, resolution: Resolution):
        """(reason, detail, rule, result): the refusal, or None with the resolution rule that
        allows it and the validated result fields it promotes."""
        call = step.call
        if call.state not in (S.RECONCILING, S.MANUAL_REVIEW) or step.latest is None:
            return (DispatchReason.CALL_NOT_UNRESOLVED, f"the call is {call.state}", None, None)
        intent = Intent.model_validate(call.intent)
        rule = self._policy.resolution_rule(resolution.operator_id, intent, resolution.outcome)
        if rule is None:
            return (DispatchReason.REPAIR_NOT_AUTHORIZED, f"no resolution rule of policy "
                    f"{self._policy.current_version()} lets {resolution.operator_id} settle it as "
                    f"{resolution.outcome}", None, None)
        if resolution.outcome == "failed":
            return None, None, rule, None
        if step.tool is None:
            return (DispatchReason.UNKNOWN_TOOL, "the registry no longer declares the tool whose "
                    "result would be validated", None, None)
        result, problem = parsed_result(step.tool, resolution.result)
        if problem is not None:
            return DispatchReason.RESULT_INVALID, problem, None, None
        return None, None, rule, result

    # -- sagas ----------------------------------------------------------------------------

    async def _after_failure(self, step: _Step, reason: str, detail: str) -> None:
        """The run stops dispatching; a failure undoes its done steps, a run out of budget or
        time keeps them (nothing applied is undone unless someone asks for it)."""
        if step.call.compensates is not None:
            await self._compensation_settled(step, S.COMPENSATION_FAILED, reason)
            return
        if await repo.abort_run(step.conn, step.call.run, f"{reason}: {detail}",
                                compensate=reason not in STOPS_WITHOUT_UNDOING):
            self._events.call_event(step.uow, RUN_ABORTED, step.call, step.lease, state=step.call.state,
                              version=step.call.version, reason=reason, detail=detail)
            for unsent in await repo.unsent_calls(step.conn, step.call.run):
                if unsent.logical_call_id == step.call.logical_call_id:
                    continue
                other = _Step(step.uow, unsent, step.run, step.lease, step.tool, [], step.now,
                              step.after, step.observed)
                await self._refuse(other, Refusal(S.DENIED, DispatchReason.RUN_ABORTED,
                                                  f"{step.call.tool_name} failed: {reason}"))
        await self._advance_saga(step)

    async def _advance_saga(self, step: _Step) -> None:
        """In an aborted run, compensate done steps one at a time, latest first."""
        run = await repo.run_for_update(step.conn, step.call.run)
        if run.aborted_at is None or not run.compensates:
            return
        in_flight, done = await repo.saga_position(step.conn, run.key)
        if in_flight:
            return
        for original in done:
            tool = self.tool_of(original)
            if tool is None or tool.compensating_tool is None:
                continue
            if await self._request_compensation(step, original, tool):
                return

    async def _request_compensation(self, step: _Step, original: Call, tool: ToolSpec) -> bool:
        """True when a compensation is now proposed to the policy (its call recorded, waiting
        for the capability); False when it could not even start (recorded as
        COMPENSATION_FAILED, and the saga moves on to the next step)."""
        deadline = step.now + timedelta(seconds=self._settings.compensation_window_s)
        try:
            intent, proposal = self._compensation_for(original, tool, deadline)
            await repo.extend_work(step.conn, original.run, deadline)
            if not await repo.insert_call(step.conn, intent=intent.model_dump(mode="json"),
                                          capability=None,
                                          policy_version=self._policy.current_version(),
                                          deadline_at=deadline, compensates=original.logical_call_id,
                                          traceparent=current_traceparent(), due_at=deadline):
                raise NoCompensation(DispatchReason.COMPENSATION_NOT_AUTHORIZED,
                                     f"operation key {intent.operation_key} already names a call")
        except NoCompensation as problem:
            version = await self._move_other(step, original, S.COMPENSATING)
            self._events.call_event(step.uow, COMPENSATION_REQUESTED, original, step.lease,
                              state=S.COMPENSATING, version=version, reason=problem.reason,
                              detail=problem.detail)
            version = await self._move_other(step, original.with_version(S.COMPENSATING, version),
                                             S.COMPENSATION_FAILED, reason=problem.reason)
            self._events.call_event(step.uow, COMPENSATION_SETTLED, original, step.lease,
                              state=S.COMPENSATION_FAILED, version=version, reason=problem.reason,
                              detail=problem.detail)
            step.count(metrics.COMPENSATION_FAILED, original)
            return False
        step.uow.emit(self._settings.compensations_topic, Envelope.new(
            event_type=COMPENSATION_PROPOSED, run_id=intent.run_id, producer=events.PRODUCER,
            payload=proposal.model_dump(mode="json")))
        version = await self._move_other(step, original, S.COMPENSATING)
        self._events.call_event(step.uow, COMPENSATION_REQUESTED, original, step.lease,
                          state=S.COMPENSATING, version=version,
                          detail=f"{intent.tool_name} as call {intent.logical_call_id}, proposed "
                                 "to the policy")
        step.after.append("compensation_requested")
        return True

    def _compensation_for(self, original: Call, tool: ToolSpec,
                          deadline: datetime) -> tuple[Intent, CompensationProposal]:
        """The compensating call's intent, and the sealed proposal that asks the policy for its
        capability."""
        ref = tool.compensating_tool
        try:
            compensating = self._registry.resolve(ref.name, ref.version)
        except Rejection as rejection:
            raise NoCompensation(DispatchReason.UNKNOWN_TOOL, rejection.message) from None
        if compensating.requires_approval:
            raise NoCompensation(DispatchReason.APPROVAL_MISSING,
                                 f"{compensating.name} needs a person's approval; a saga cannot "
                                 "give it")
        if self._proposer is None:
            raise NoCompensation(DispatchReason.COMPENSATION_NOT_AUTHORIZED,
                                 "this dispatcher has no key to propose compensations with")
        intent = intent_for(original, compensating, tool.compensation_arguments, deadline)
        return intent, self._proposer.propose(intent, original.operation_key)

    async def _compensation_settled(self, step: _Step, to: CallState, reason: str | None) -> None:
        original = await repo.call_for_update(step.conn, step.call.compensates)
        version = await self._move_other(step, original, to, reason=reason)
        self._events.call_event(step.uow, COMPENSATION_SETTLED, original, step.lease, state=to,
                          version=version, reason=reason,
                          detail=f"by {step.call.tool_name} call {step.call.logical_call_id}")
        step.count(metrics.COMPENSATION_SUCCEEDED if to == S.COMPENSATED
                   else metrics.COMPENSATION_FAILED, original)
        await self._advance_saga(step)

    # -- plumbing -------------------------------------------------------------------------

    def _refusal(self, step: _Step) -> Refusal | None:
        return refusal_at_dispatch(step.call, step.run, self._policy, self._keys, step.now,
                                   requires_approval=step.tool.requires_approval)

    async def _move(self, step: _Step, to: CallState, **fields) -> int:
        version = await repo.transition(step.conn, step.call, to, fence=step.lease.fence,
                                        transitions=CALL_TRANSITIONS, **fields)
        step.call = step.call.with_version(to, version)
        return version

    async def _move_other(self, step: _Step, call: Call, to: CallState, **fields) -> int:
        return await repo.transition(step.conn, call, to, fence=step.lease.fence,
                                     transitions=CALL_TRANSITIONS, next_action_at=None, **fields)
