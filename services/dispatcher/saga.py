"""The saga's side of a step (docs/design.md §5.8): stopping a run, settling a compensated
call, and requesting the next compensation. These read and lock other rows of the run (its
unsent calls, its done steps, the original of a compensation), so the executor applies them;
which step is undone next is decided by ``decide.compensate``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from services.dispatcher import events, metrics, repository as repo
from services.dispatcher.authority import PolicyView
from services.dispatcher.compensations import NoCompensation, Proposer, intent_for
from services.dispatcher.decide.actions import StopRun
from services.dispatcher.decide.compensate import next_to_compensate
from services.dispatcher.repository import Call
from services.dispatcher.settings import DispatcherSettings
from shared.contracts.compensations import COMPENSATION_PROPOSED, CompensationProposal
from shared.contracts.dispatch import (COMPENSATION_REQUESTED, COMPENSATION_SETTLED,
                                       DISPATCH_REFUSED, CallState as S,
                                       DispatchReason)
from shared.contracts.intake import Intent
from shared.messaging.envelope import Envelope
from shared.tools import Rejection, ToolRegistry, ToolSpec
from shared.tracing import current_traceparent

if TYPE_CHECKING:
    from services.dispatcher.steps import Step


class Saga:
    def __init__(self, registry: ToolRegistry, policy: PolicyView, proposer: Proposer | None,
                 settings: DispatcherSettings, recorder: events.Recorder,
                 tool_of: Callable[[Call], ToolSpec | None]) -> None:
        self._registry = registry
        self._policy = policy
        self._proposer = proposer
        self._settings = settings
        self._events = recorder
        self._tool_of = tool_of

    async def stop(self, step: Step, stop: StopRun) -> None:
        """The first stop of a run refuses its calls not yet sent (all but the stepped call,
        whose own decision refuses it); a later one changes nothing."""
        call = step.call
        if not await repo.abort_run(step.conn, call.run, stop.reason, stop.detail,
                                    compensate=stop.compensate):
            return
        self._events.run_aborted(step.uow, call, step.lease, reason=stop.reason,
                                 detail=stop.detail)
        if stop.reason == DispatchReason.RUN_CANCELLED:
            reason, detail = DispatchReason.RUN_CANCELLED, stop.detail
        else:
            reason, detail = DispatchReason.RUN_ABORTED, f"{call.tool_name} failed: {stop.reason}"
        for unsent in await repo.unsent_calls(step.conn, call.run):
            if unsent.logical_call_id == call.logical_call_id:
                continue
            version = await step.move(unsent, S.DENIED, next_action_at=None, reason=reason)
            self._events.call_event(step.uow, DISPATCH_REFUSED, unsent, step.lease,
                                    state=S.DENIED, version=version, reason=reason,
                                    detail=detail)

    async def settle_original(self, step: Step, to: S, reason: DispatchReason | None) -> None:
        original = await repo.call_for_update(step.conn, step.call.compensates)
        version = await self._move_other(step, original, to, reason=reason)
        self._events.call_event(step.uow, COMPENSATION_SETTLED, original, step.lease, state=to,
                                version=version, reason=reason,
                                detail=f"by {step.call.tool_name} call {step.call.logical_call_id}")
        step.observed.append((metrics.COMPENSATION_SUCCEEDED if to == S.COMPENSATED
                              else metrics.COMPENSATION_FAILED, original.tool_name))

    async def advance(self, step: Step) -> None:
        """In an aborted run, compensate done steps one at a time, latest first."""
        run = await repo.run_for_update(step.conn, step.call.run)
        if run.aborted_at is None or not run.compensates:
            return
        in_flight, done = await repo.saga_position(step.conn, run.key)
        for original, tool in next_to_compensate(in_flight, done, self._tool_of):
            if await self._request(step, original, tool):
                return

    async def _request(self, step: Step, original: Call, tool: ToolSpec) -> bool:
        """True when a compensation is now proposed to the policy (its call recorded, waiting
        for the capability); False when it could not even start (recorded as
        COMPENSATION_FAILED, and the saga moves on to the next step)."""
        deadline = step.now + timedelta(seconds=self._settings.compensation_window_s)
        try:
            intent, proposal = self._compensation_for(original, tool, deadline)
            await repo.extend_work(step.conn, original.run, deadline)
            if not await repo.insert_call(step.conn, repo.NewCall(
                    intent.model_dump(mode="json"), None, self._policy.current_version(),
                    deadline, compensates=original.logical_call_id,
                    traceparent=current_traceparent(), due_at=deadline)):
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
                                    state=S.COMPENSATION_FAILED, version=version,
                                    reason=problem.reason, detail=problem.detail)
            step.observed.append((metrics.COMPENSATION_FAILED, original.tool_name))
            return False
        step.uow.emit(self._settings.compensations_topic, Envelope.new(
            event_type=COMPENSATION_PROPOSED, run_id=intent.run_id, producer=events.PRODUCER,
            payload=proposal.model_dump(mode="json")))
        version = await self._move_other(step, original, S.COMPENSATING)
        self._events.call_event(step.uow, COMPENSATION_REQUESTED, original, step.lease,
                                state=S.COMPENSATING, version=version,
                                detail=f"{intent.tool_name} as call {intent.logical_call_id}, "
                                       "proposed to the policy")
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

    async def _move_other(self, step: Step, call: Call, to: S, **fields) -> int:
        return await step.move(call, to, next_action_at=None, **fields)
