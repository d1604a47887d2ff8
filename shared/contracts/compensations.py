"""``ledger.compensations``: the dispatcher asks the policy to authorize a compensation.

A compensation is a new effect (a refund, a release), so it needs a capability like any other,
and only the policy signs capabilities. The dispatcher alone knows that a run was aborted and
which of its effects were applied, so it proposes the compensating intent, sealed with its own
key (``shared.identity.sealed``): the relay publishes whatever an outbox row says, and a
proposal is believed for its signature only. The policy checks the signature against the
principals file (a service principal with role ``compensator``), checks that the intent is the
one the registry derives for the call it compensates, judges it under its rules, and answers on
``ledger.authorizations`` as for any intent.
"""

from __future__ import annotations


from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from shared.contracts.intake import Intent
from shared.identity.sealed import SIGNATURE_PATTERN

COMPENSATION_PROPOSED = "CompensationProposed"
TYP = "intentledger-compensation+jws"
"""The ``typ`` of a proposal's sealed signature."""


class CompensationProposal(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: Intent = Field(description="The compensating call; its ``compensates`` names the call "
                           "whose effect it gives back.")
    original_operation_key: str = Field(description="The compensated call's operation key, from "
                                        "which the compensation's own key is derived.")
    requested_by: str = Field(description="The principal that seals it (the dispatcher's).")
    expires_at: AwareDatetime = Field(description="The compensation's deadline: the proposal is "
                                      "not authorized after it.")
    signature: str = Field(pattern=SIGNATURE_PATTERN, max_length=1024, description=(
        "A compact JWS with a detached payload (the RFC 8785 form of every other field), by a "
        "key of ``requested_by`` in the principals file; its protected header names the kid."))
