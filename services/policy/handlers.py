"""From ``ledger.intake``, ``ledger.approvals`` and ``ledger.compensations`` to verdicts, in the
consumer's transaction.

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
(``compensations.py``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from joserfc.jwk import OKPKey

from services.policy import repository as repo
from services.policy.approvals import already_counted, approval_refusal, granted
from services.policy.compensations import proposal_refusal
from shared.policy.document import Policy
from shared.policy.engine import Decision, Request, evaluate
from shared.policy.limits import Usage, applicable_limits, usage_of
from services.policy.outcomes import announce
from services.policy.verdicts import denial, verdict_of
from shared.policy.watcher import PolicyWatcher
from shared.contracts.approvals import APPROVAL_GRANTED, APPROVAL_REFUSED, ApprovalDecision
from shared.contracts.authorizations import PolicyReason
from shared.contracts.compensations import CompensationProposal
from shared.contracts.intake import Intent
from shared.db.unit_of_work import UnitOfWork
from shared.errors import PermanentError
from shared.identity.acting import APPROVER, acting_principal
from shared.identity.principals import PrincipalsWatcher
from shared.identity.records import SignedEnvelope
from shared.identity.signatures import APPROVAL, SignatureRefused
from shared.ids import new_event_id
from shared.messaging.envelope import Envelope, parse
from shared.tools import Rejection, ToolRegistry

log = logging.getLogger(__name__)
_DECISION_OF = {APPROVAL_GRANTED: "granted", APPROVAL_REFUSED: "refused"}


class PolicyHandler:
    def __init__(self, policies: PolicyWatcher, registry: ToolRegistry, key: OKPKey,
                 topic: str, principals: PrincipalsWatcher) -> None:
        self._policies = policies
        self._principals = principals
        self._registry = registry
        self._key = key
        self._topic = topic

    async def decide(self, uow: UnitOfWork, envelope: Envelope) -> None:
        intent = parse(envelope, Intent)
        policy, now, decision_id = self._policies.current, datetime.now(UTC), new_event_id()
        try:
            tool = self._registry.get(intent.tool_name, intent.tool_version)
        except Rejection as rejection:
            verdict = denial(decision_id, policy.version, None, PolicyReason.TOOL_NOT_IN_REGISTRY,
                             rejection.message, now, {"intent": intent.model_dump(mode="json")})
            amount = None
        else:
            request = Request.of(intent, tool, now)
            decision, usage = await judge(uow, policy, request)
            verdict = verdict_of(decision_id, decision, request, usage, self._key)
            amount = request.amount
        if await repo.insert_decision(uow.connection, intent, amount, verdict):
            announce(uow, self._topic, intent, verdict, envelope)

    async def on_approval(self, uow: UnitOfWork, envelope: SignedEnvelope) -> None:
        approval = _approval(envelope)
        conn, now = uow.connection, datetime.now(UTC)
        stored = await repo.decision_for_update(conn, approval.logical_call_id)
        refusal = (self._identity_refusal(envelope, approval, now)
                   or approval_refusal(stored.pending if stored else None, approval, now))
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
            decision, usage = await judge(uow, self._policies.current, request)
            if decision.effect == "require_approval":
                return  # the quorum is not reached yet
            verdict = verdict_of(stored.decision_id, decision, request, usage, self._key)
        await repo.conclude(conn, stored, verdict)
        announce(uow, self._topic, stored.intent, verdict, envelope)

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
            announce(uow, self._topic, intent, verdict, envelope)

    def _identity_refusal(self, envelope: SignedEnvelope, approval: ApprovalDecision,
                          now: datetime) -> str | None:
        """Why the approval's signature does not prove its approver decided, or None. The
        tenant is the approval's own: ``approval_refusal`` then binds it to the call's."""
        try:
            acting_principal(envelope.record_value, envelope.signatures, self._principals.current,
                             use=APPROVAL, tenant_id=approval.tenant_id,
                             named=approval.approver_id, role=APPROVER, now=now)
        except SignatureRefused as refused:
            log.info("approval %s naming %s: %s", envelope.event_id, approval.approver_id,
                     refused.message)
            return refused.code
        return None


async def judge(uow: UnitOfWork, policy: Policy, request: Request) -> tuple[Decision, Usage]:
    """Evaluate with the usage of every applicable limit, read under the limits' scope locks
    (held until commit, so the next decision in the same scope sees this one)."""
    limits = applicable_limits(policy, request.intent)
    if limits:
        # Both scopes, whatever this version counts per: a replica still on another version
        # may count the same calls per the other scope, and must wait for us all the same.
        intent = request.intent
        await repo.lock_scopes(uow.connection, [f"principal:{intent.principal_id}",
                                                f"tenant:{intent.tenant_id}"])
    usage = {}
    for limit in limits:
        since = request.now - timedelta(seconds=limit.window_seconds)
        totals = await repo.allowed_totals(uow.connection, limit.scope, request.intent, since)
        usage[limit.name] = usage_of(limit, totals)
    return evaluate(policy, request, usage), usage


def _approval(envelope: Envelope) -> ApprovalDecision:
    approval = parse(envelope, ApprovalDecision)
    if approval.decision != _DECISION_OF[envelope.event_type]:
        raise PermanentError(f"{envelope.event_type} carries decision {approval.decision!r}")
    return approval
