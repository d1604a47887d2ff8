"""Whether a compensation proposal (``shared.contracts.compensations``) may be judged at all.

It is believed for its seal only: a key of the principal it names, usable now, that principal
holding role ``compensator`` for the compensation's tenant; and only for a call this policy
allowed, as the very compensation the registry derives for that call. A proposal that fails
any of this is not a denial to announce (who would it answer?) but a forgery or a bug: it is
dead-lettered, visibly, and nothing is authorized. One that passes is judged by the rules like
any intent, but not counted against rate or velocity limits: giving back is never throttled.
"""

from __future__ import annotations

from datetime import datetime

from shared.contracts.compensations import TYP, CompensationProposal
from shared.identity.acting import COMPENSATOR
from shared.identity.principals import Principals
from shared.identity.sealed import Unsealed, fields_of, signer_of
from shared.tools import Rejection, ToolRegistry
from shared.tools.compensation import compensation_mismatch
from services.policy.repository import StoredDecision


def proposal_refusal(proposal: CompensationProposal, principals: Principals,
                     registry: ToolRegistry, original: StoredDecision | None,
                     now: datetime) -> str | None:
    """Why ``proposal`` is not to be judged, or None; ``original``: this policy's decision on
    the call it names as compensated."""
    intent = proposal.intent

    def key_of(kid: str):
        found = principals.by_kid(kid)
        return found[1].key if found is not None else None

    try:
        kid = signer_of(fields_of(proposal), proposal.signature, TYP, key_of)
    except Unsealed as refused:
        return f"seal {refused}"
    principal, public = principals.by_kid(kid)
    if principal.id != proposal.requested_by:
        return f"sealed by {principal.id}, names {proposal.requested_by!r}"
    if (why := public.unusable_at(now)) is not None:
        return f"key {kid} of {principal.id} is {why}"
    if not principal.has_role(COMPENSATOR) or not principal.acts_for(intent.tenant_id):
        return f"{principal.id} may not propose compensations for tenant {intent.tenant_id!r}"
    if proposal.expires_at <= now:
        return f"expired at {proposal.expires_at.isoformat()}"
    if original is None or original.outcome != "allowed":
        return f"call {intent.compensates} was not allowed by this policy"
    if original.intent.operation_key != proposal.original_operation_key:
        return "another operation key than the compensated call's"
    try:
        original_tool = registry.get(original.intent.tool_name, original.intent.tool_version)
        compensating = registry.get(intent.tool_name, intent.tool_version)
    except Rejection as rejection:
        return rejection.message
    return compensation_mismatch(original.intent, original_tool, compensating, intent)
