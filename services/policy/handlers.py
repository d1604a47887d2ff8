"""From ``ledger.intake``, ``ledger.approvals``, ``ledger.compensations`` and the run
cancellations on ``ledger.resolutions`` to verdicts, in the consumer's transaction.

An accepted intent gets exactly one decision (its id is unique): allowed with a
capability, denied with a reason, or awaiting approval. Approvals are recorded whether they
count or not; the one that completes a quorum re-evaluates the call under the policy in force
now (authority outlives no policy version) and concludes it. A record that is not what its
event type says raises PermanentError, so the consumer template dead-letters it. Which
handler applies which event is ``routes.py``.

An approval counts only for the principal whose signature proves it acts
(``shared.identity.acting``): the approver it names, with role ``approver``, for the call's
tenant. Quorums therefore count distinct verified principals, never distinct names.

A compensation the dispatcher proposes is judged only once its seal and its derivation hold
(``compensations.py``). An operator's cancellation of a run denies its calls waiting for
approval, once its signature proves an operator of the run's tenant sent it
(``cancellations.py``). The agent that proposed a call may withdraw it while it awaits
approval: it is then denied ``call_withdrawn`` (``withdrawals.py``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from joserfc.jwk import OKPKey

from services.policy import cancellations, repository as repo, withdrawals
from services.policy.approvals import already_counted, approval_refusal, granted
from services.policy.compensations import proposal_refusal
from services.policy.judging import judge, judge_all
from shared.policy.engine import Request, evaluate
from shared.policy.limits import applicable_limits
from services.policy.outcomes import Destinations, announce
from services.policy.verdicts import denial, verdict_of
from shared.policy.watcher import PolicyWatcher
from shared.contracts.approvals import APPROVAL_GRANTED, APPROVAL_REFUSED, ApprovalDecision
from shared.contracts.cancellations import RunCancellation
from shared.contracts.authorizations import PolicyReason
from shared.contracts.compensations import CompensationProposal
from shared.contracts.withdrawals import CallWithdrawal
from shared.contracts.intake import Intent
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError
from shared.identity import acting
from shared.identity.acting import APPROVER, OPERATOR
from shared.identity.principals import PrincipalsWatcher
from shared.identity.records import SignedEnvelope
from shared.identity.signatures import APPROVAL, CANCELLATION
from shared.ids import new_event_id
from shared.messaging.envelope import Envelope, parse
from shared.runs import RunKey
from shared.tools import Rejection, ToolRegistry

log = logging.getLogger(__name__)
_DECISION_OF = {APPROVAL_GRANTED: "granted", APPROVAL_REFUSED: "refused"}


class PolicyHandler:
    def __init__(self, policies: PolicyWatcher, registry: ToolRegistry, key: OKPKey,
                 to: Destinations, principals: PrincipalsWatcher) -> None:
        self._policies = policies
        self._principals = principals
        self._registry = registry
        self._key = key
        self._to = to

    async def decide(self, uow: UnitOfWork, envelope: Envelope) -> None:
        await self.decide_all(uow, [envelope])

    async def decide_all(self, uow: UnitOfWork, envelopes: list[Envelope]) -> None:
        """Accepted intents, decided in order in a constant number of statements: each once
        (a call decided already, or twice in the batch, is not decided again)."""
        policy, now = self._policies.current, datetime.now(UTC)
        intents = {}
        for envelope in envelopes:
            intent = parse(envelope, Intent)
            intents.setdefault(intent.logical_call_id, (intent, envelope))
        if any(applicable_limits(policy, intent) for intent, _ in intents.values()):
            for done in await repo.decided(uow.connection, list(intents)):
                del intents[done]  # so that it counts in no one's usage twice
        known, verdicts = [], {}
        for call, (intent, _) in intents.items():
            try:
                known.append(Request.of(intent, self._registry.get(intent.tool_name,
                                                                    intent.tool_version), now))
            except Rejection as rejection:
                verdicts[call] = (None, denial(
                    new_event_id(), policy.version, None, PolicyReason.TOOL_NOT_IN_REGISTRY,
                    rejection.message, now, {"intent": intent.model_dump(mode="json")}))
        for request, judged in zip(known, await judge_all(uow, policy, known), strict=True):
            verdicts[request.intent.logical_call_id] = (request.amount, verdict_of(
                new_event_id(), judged.decision, request, judged.usage, self._key))
        await self._withdraw_if_cancelled(uow, intents, verdicts)
        decided = [(intent, *verdicts[call]) for call, (intent, _) in intents.items()]
        inserted = await repo.insert_decisions(uow.connection, decided) if decided else set()
        for call, (intent, envelope) in intents.items():
            if call in inserted:
                announce(uow, self._to, intent, verdicts[call][1], envelope)

    async def _withdraw_if_cancelled(self, uow: UnitOfWork, intents: dict, verdicts: dict) -> None:
        """A call that would wait for approval in a run an operator cancelled is denied instead
        (``cancellations.py``); only such calls cost a statement, under the run's lock."""
        waiting = {call: intent for call, (intent, _) in intents.items()
                   if verdicts[call][1].outcome == "awaiting_approval"}
        if not waiting:
            return
        runs = [RunKey.of(intent) for intent in waiting.values()]
        await cancellations.lock_runs(uow.connection, runs)
        stopped = await cancellations.cancelled(uow.connection, runs)
        for call, intent in waiting.items():
            if (why := stopped.get(RunKey.of(intent))) is not None:
                amount, verdict = verdicts[call]
                verdicts[call] = (amount, denial(verdict.decision_id, verdict.policy_version,
                                                 verdict.rule, PolicyReason.RUN_CANCELLED, why,
                                                 verdict.issued_at, verdict.inputs))

    async def on_cancellation(self, uow: UnitOfWork, envelope: SignedEnvelope) -> None:
        """Deny the run's calls waiting for approval; a cancellation whose signature does not
        prove an operator of the run's tenant is ignored here (the dispatcher records why)."""
        cancellation = parse(envelope, RunCancellation)
        if (refused := acting.refusal(envelope, self._principals.current, use=CANCELLATION,
                                      tenant_id=cancellation.tenant_id,
                                      named=cancellation.operator_id, role=OPERATOR)) is not None:
            log.info("cancellation %s naming %s: %s", envelope.event_id,
                     cancellation.operator_id, refused.message)
            return
        conn, now, run = uow.connection, datetime.now(UTC), RunKey.of(cancellation)
        await cancellations.lock_runs(conn, [run])
        await cancellations.record(conn, cancellation, envelope.event_id)
        why = cancellations.cancelled_by(cancellation.operator_id, cancellation.reason)
        for stored in await repo.awaiting_of_run_for_update(conn, run.tenant_id, run.run_id):
            verdict = denial(stored.decision_id, stored.policy_version, stored.rule,
                             PolicyReason.RUN_CANCELLED, why, now, stored.inputs)
            await repo.conclude(conn, stored, verdict)
            announce(uow, self._to, stored.intent, verdict, envelope)

    async def on_approval(self, uow: UnitOfWork, envelope: SignedEnvelope) -> None:
        approval = _approval(envelope)
        conn, now = uow.connection, datetime.now(UTC)
        refusal = self._identity_refusal(envelope, approval, now)  # before any lock is taken
        stored = None if refusal else await repo.decision_for_update(conn, approval.logical_call_id)
        refusal = refusal or approval_refusal(stored.pending if stored else None, approval, now)
        if refusal is not None:
            log.info("approval %s by %s refused: %s", envelope.event_id, approval.approver_id, refusal)
            await repo.insert_approval(conn, envelope.event_id, approval, "refused", refusal)
            return
        chain = await repo.counted_grants(conn, approval.logical_call_id)
        if approval.decision == "granted" and already_counted(approval.approver_id, chain, now):
            await repo.insert_approval(conn, envelope.event_id, approval, "repeated",
                                       PolicyReason.APPROVER_ALREADY_COUNTED)
            return
        await repo.insert_approval(conn, envelope.event_id, approval, "counted", None)
        if approval.decision == "refused":
            verdict = denial(stored.decision_id, stored.policy_version, stored.rule,
                             PolicyReason.APPROVAL_REFUSED, f"refused by {approval.approver_id}"
                             + (f": {approval.reason}" if approval.reason else ""), now, stored.inputs)
        else:
            approvals = (granted(approval, envelope.event_id), *chain)
            try:
                tool = self._registry.get(stored.intent.tool_name, stored.intent.tool_version)
                request = Request.of(stored.intent, tool, now, approvals)
            except Rejection:  # the tool left the registry since: approvals cannot waive that
                request = Request(stored.intent, stored.amount, now, approvals,
                                  tool_requires_approval=True)
            judged = await judge(uow, self._policies.current, request)
            decision, usage = judged.decision, judged.usage
            if decision.effect == "require_approval":
                return  # the quorum is not reached yet
            verdict = verdict_of(stored.decision_id, decision, request, usage, self._key)
        await repo.conclude(conn, stored, verdict)
        announce(uow, self._to, stored.intent, verdict, envelope)

    async def on_withdrawal(self, uow: UnitOfWork, envelope: SignedEnvelope) -> None:
        """Deny the call ``call_withdrawn`` if its own proposer withdraws it while it waits;
        otherwise record why not and change nothing."""
        withdrawal = parse(envelope, CallWithdrawal)
        conn, now = uow.connection, datetime.now(UTC)
        proven = withdrawals.sender(envelope.record_value, envelope.signatures,
                                    self._principals.current, withdrawal)
        stored = None
        if isinstance(proven, str):
            refused: str | None = proven
        else:
            stored = await repo.decision_for_update(conn, withdrawal.logical_call_id)
            refused = withdrawals.refusal(proven, withdrawal, stored)
        await withdrawals.record(conn, envelope.event_id, withdrawal, refused)
        if refused is not None:
            log.info("withdrawal %s of %s naming %s refused: %s", envelope.event_id,
                     withdrawal.logical_call_id, withdrawal.principal_id, refused)
            return
        verdict = denial(stored.decision_id, stored.policy_version, stored.rule,
                         PolicyReason.CALL_WITHDRAWN, withdrawals.withdrawn_by(withdrawal), now,
                         stored.inputs)
        await repo.conclude(conn, stored, verdict)
        announce(uow, self._to, stored.intent, verdict, envelope)

    async def on_compensation(self, uow: UnitOfWork, envelope: Envelope) -> None:
        proposal = parse(envelope, CompensationProposal)
        intent, now = proposal.intent, datetime.now(UTC)
        original = (await repo.decision_for_update(uow.connection, intent.compensates)
                    if intent.compensates is not None else None)
        refusal = proposal_refusal(proposal, self._principals.current, self._registry, original, now)
        if refusal is not None:
            log.warning("compensation proposal %s refused: %s", envelope.event_id, refusal)
            raise PermanentError(f"compensation proposal refused: {refusal}")
        request = Request.of(intent, self._registry.get(intent.tool_name, intent.tool_version), now)
        decision = evaluate(self._policies.current, request, None)  # limits: never throttled
        verdict = verdict_of(new_event_id(), decision, request, None, self._key)
        if await repo.insert_decision(uow.connection, intent, request.amount, verdict):
            announce(uow, self._to, intent, verdict, envelope)

    def _identity_refusal(self, envelope: SignedEnvelope, approval: ApprovalDecision,
                          now: datetime) -> str | None:
        """Why the approval's signature does not prove its approver decided, or None. The
        tenant is the approval's own: ``approval_refusal`` then binds it to the call's."""
        refused = acting.refusal(envelope, self._principals.current, use=APPROVAL,
                                 tenant_id=approval.tenant_id, named=approval.approver_id,
                                 role=APPROVER, now=now)
        if refused is None:
            return None
        log.info("approval %s naming %s: %s", envelope.event_id, approval.approver_id,
                 refused.message)
        return refused.code


def _approval(envelope: Envelope) -> ApprovalDecision:
    approval = parse(envelope, ApprovalDecision)
    if approval.decision != _DECISION_OF[envelope.event_type]:
        raise PermanentError(f"{envelope.event_type} carries decision {approval.decision!r}")
    return approval
