"""What the dispatcher's consumer does with a record: store the fact, wake the scheduler.

No decision is taken here. An authorization becomes a call due at once (for a compensation,
which the dispatcher recorded when it proposed it, the policy's capability or denial is put on
the waiting call); a receipt becomes the
answer of the attempt it names (the first answer counts; a redelivered copy changes nothing);
an operator's resolution is kept until the call's next step judges it, once its signature
proves the operator it names sent it (``shared.identity.acting``); one that does not is
refused here, and the call is not even woken. An operator's cancellation of a run likewise
(``cancellations.py``): recorded, its signature checked, and one call of the run woken to
apply it.
The step that acts on them runs under the run's lease (``steps.py``), whichever replica
consumed the record: for a call of a Kafka tool, usually in this record's own transaction,
before it commits (``finishing.py``). Consecutive authorizations, and consecutive receipts, of
a consumed batch are applied together (``main.py``), in a constant number of statements.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta

from services.dispatcher import attempts, cancellations, due, repository as repo, resolutions
from services.dispatcher.breaker import Breakers
from services.dispatcher.decide.cancel import RUN_ALREADY_STOPPED, cancelled_by
from services.dispatcher.finishing import Finishing
from services.dispatcher.settings import DispatcherSettings
from services.dispatcher.steps import Stepper, dependency_of
from shared.contracts.authorizations import Authorization, AuthorizationRefusal
from shared.contracts.cancellations import RunCancellation
from shared.contracts.dispatch import DispatchReason
from shared.contracts.effect_requests import EffectReceipt
from shared.contracts.resolutions import Resolution
from shared.db.unit_of_work import UnitOfWork
from shared.identity import acting
from shared.identity.acting import OPERATOR
from shared.identity.principals import PrincipalsWatcher
from shared.identity.records import SignedEnvelope
from shared.identity.signatures import CANCELLATION, RESOLUTION
from shared.messaging.envelope import Envelope, parse
from shared.runs import RunKey

log = logging.getLogger(__name__)

FALLBACK_RUN_SECONDS = 3600.0
"""For an intent without a deadline (the intake always sets one)."""


class DispatcherInbox:
    def __init__(self, stepper: Stepper, breakers: Breakers, settings: DispatcherSettings,
                 principals: PrincipalsWatcher, finishing: Finishing) -> None:
        self._principals = principals
        self._finishing = finishing
        self._stepper = stepper
        self._breakers = breakers
        self._settings = settings

    async def resolution_requested(self, uow: UnitOfWork, envelope: SignedEnvelope) -> None:
        resolution = parse(envelope, Resolution)
        conn = uow.connection
        call = await repo.call_for_update(conn, resolution.logical_call_id)  # call first
        await resolutions.record(conn, envelope.event_id, resolution.logical_call_id,
                                 resolution.model_dump(mode="json"))
        if call is not None and (refused := self._not_an_operator(
                envelope, RESOLUTION, call.tenant_id, resolution.operator_id)) is not None:
            log.warning("resolution of %s naming %s refused: %s", call.logical_call_id,
                        resolution.operator_id, refused)
            await resolutions.conclude(conn, envelope.event_id, "refused", refused)
            return
        await due.wake(conn, resolution.logical_call_id, even_if_settled=True)

    async def cancellation_requested(self, uow: UnitOfWork, envelope: SignedEnvelope) -> None:
        cancellation = parse(envelope, RunCancellation)
        conn, run = uow.connection, RunKey(cancellation.tenant_id, cancellation.run_id)
        await cancellations.record(conn, envelope.event_id, cancellation)
        if (refused := self._not_an_operator(envelope, CANCELLATION, cancellation.tenant_id,
                                             cancellation.operator_id)) is not None:
            log.warning("cancellation of run %s naming %s refused: %s", run,
                        cancellation.operator_id, refused)
            await cancellations.conclude(conn, envelope.event_id, "refused", refused)
            return
        if (call_id := await cancellations.call_to_step(conn, run)) is not None:
            await due.wake(conn, call_id, even_if_settled=True)
            self._finishing.step_before_commit(uow, call_id)
            return
        detail = cancelled_by(cancellation.operator_id, cancellation.reason)
        if await repo.abort_run(conn, run, DispatchReason.RUN_CANCELLED, detail,
                                compensate=cancellation.compensate):
            await cancellations.conclude(conn, envelope.event_id, "applied",
                                         "no call of the run had reached the dispatcher yet")
        else:
            await cancellations.conclude(conn, envelope.event_id, "refused",
                                         f"{RUN_ALREADY_STOPPED}: the run had stopped already")

    def _not_an_operator(self, envelope: SignedEnvelope, use: str, tenant_id: str,
                         named: str) -> str | None:
        """Why the signature does not prove an operator of ``tenant_id`` named ``named`` sent
        the record (``code: message``), or None when it does."""
        refused = acting.refusal(envelope, self._principals.current, use=use,
                                 tenant_id=tenant_id, named=named, role=OPERATOR)
        return None if refused is None else f"{refused.code}: {refused.message}"

    async def authorized(self, uow: UnitOfWork, envelope: Envelope) -> None:
        await self.authorized_all(uow, [envelope])

    async def authorized_all(self, uow: UnitOfWork, envelopes: list[Envelope]) -> None:
        """A stretch of authorizations: the new intents' runs and calls in one statement."""
        calls: dict[uuid.UUID, repo.NewCall] = {}
        runs: dict[RunKey, repo.NewRun] = {}
        for envelope in envelopes:
            authorization = parse(envelope, Authorization)
            intent = authorization.intent
            if intent.compensates is not None:  # the call exists: it waits for this capability
                await self._compensation_answered(
                    uow, intent.logical_call_id, authorization.capability.model_dump(mode="json"),
                    authorization.policy_version, None)
                continue
            deadline = intent.deadline_at or datetime.now(UTC) + timedelta(
                seconds=FALLBACK_RUN_SECONDS)
            runs.setdefault(RunKey.of(intent), repo.NewRun(
                RunKey.of(intent), intent.principal_id, deadline,
                intent.run_max_attempts or self._settings.default_run_attempts))
            calls.setdefault(intent.logical_call_id, repo.NewCall(
                intent.model_dump(mode="json"), authorization.capability.model_dump(mode="json"),
                authorization.capability.policy_version, deadline,
                traceparent=envelope.traceparent))
        if calls:
            for new in await repo.insert_calls(uow.connection, list(calls.values()),
                                               list(runs.values())):
                self._finishing.step_before_commit(uow, new)

    async def denied(self, uow: UnitOfWork, envelope: Envelope) -> None:
        """Only a compensation waits for a denial; any other denied intent never became a call."""
        refusal = parse(envelope, AuthorizationRefusal)
        if refusal.intent.compensates is not None:
            await self._compensation_answered(
                uow, refusal.intent.logical_call_id, None, refusal.policy_version,
                {"reason_code": refusal.reason_code, "message": refusal.message,
                 "rule": refusal.rule})

    async def _compensation_answered(self, uow: UnitOfWork, logical_call_id, capability,
                                     policy_version: str, refusal) -> None:
        """The capability is checked at dispatch as any call's (a forged one is refused there)."""
        if await repo.authorize_compensation(uow.connection, logical_call_id, capability,
                                             policy_version, refusal):
            self._finishing.step_before_commit(uow, logical_call_id)
        else:
            log.info("the policy's answer for compensation %s: no call waits for it",
                     logical_call_id)

    async def answered(self, uow: UnitOfWork, envelope: Envelope) -> None:
        await self.answered_all(uow, [envelope])

    async def answered_all(self, uow: UnitOfWork, envelopes: list[Envelope]) -> None:
        """A stretch of receipts, each the answer of the attempt it names, in one statement:
        their calls locked first (as a step locks them), then the attempts answered."""
        receipts = [parse(envelope, EffectReceipt) for envelope in envelopes]
        calls, answered = await attempts.answer_receipts(uow.connection, [(
            receipt.operation_key, attempts.Answer(
                receipt.logical_call_id, receipt.attempt, receipt.status,
                f"receipt: {receipt.status}" + (f" ({receipt.reason})" if receipt.reason else ""),
                receipt.model_dump(mode="json"))) for receipt in receipts])
        for receipt in receipts:
            call = calls.get(receipt.logical_call_id)
            if call is None or call.operation_key != receipt.operation_key:
                log.info("receipt for %s attempt %d: not one of our calls",
                         receipt.operation_key, receipt.attempt)
                continue
            if (receipt.logical_call_id, receipt.attempt) not in answered:
                log.info("receipt for %s attempt %d: already answered", receipt.operation_key,
                         receipt.attempt)
                continue
            # A second copy of this answer later in the stretch finds it answered already.
            answered.discard((receipt.logical_call_id, receipt.attempt))
            if (tool := self._stepper.tool_of(call)) is not None:
                self._breakers.succeeded(dependency_of(tool))  # it answered: it is reachable
            self._finishing.step_before_commit(uow, receipt.logical_call_id)
