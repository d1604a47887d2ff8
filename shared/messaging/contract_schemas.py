"""The JSON Schema of each topic, composed from the pydantic models that produce and read it.

Each schema is self-contained (its models under ``$defs``), so an agent in any language can
validate with the one file it downloads. The composition adds only what the models cannot say
alone and the producer guarantees: which ``event_type`` a topic carries, which payload model
goes with which ``event_type``, and that a payload's ``outcome`` agrees with its ``event_type``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from shared.contracts.proposals import INBOUND_PROPOSAL
from shared.contracts.intake import (OUTCOME_OF, PROPOSAL_ACCEPTED,
                                     ProposalOutcome, Intent)
from shared.messaging.envelope import Envelope
from shared.contracts.approvals import APPROVAL_GRANTED, APPROVAL_REFUSED, ApprovalDecision
from shared.contracts.authorizations import (APPROVAL_REQUESTED, AUTHORIZATION_ALLOWED,
                                             AUTHORIZATION_DENIED, ApprovalRequest, Authorization,
                                             AuthorizationRefusal)
from shared.contracts.effect_requests import (EFFECT_LOOKUP_REQUESTED, EFFECT_RECEIPT_ISSUED,
                                              EFFECT_RECEIPTS, EFFECT_REQUESTED,
                                              EffectLookupRequested, EffectReceipt,
                                              EffectRequested)
from shared.contracts.dispatch import DISPATCH_EVENTS, CallEvent
from shared.contracts.resolutions import RESOLUTION_REQUESTED, Resolution
from shared.contracts.cancellations import RUN_CANCELLATION_REQUESTED, RunCancellation
from shared.contracts.withdrawals import CALL_WITHDRAWAL_REQUESTED, CallWithdrawal
from shared.contracts.compensations import COMPENSATION_PROPOSED, CompensationProposal
from shared.contracts.effects import EFFECT_COMMITTED, CommittedEffect
from shared.contracts.results import (TOOL_CALL_AWAITING_APPROVAL, TOOL_CALL_SETTLED,
                                     ToolCallAwaitingApproval, ToolCallSettled)
from shared.topology import (AGENT_PROPOSALS, AGENT_RESULTS, LEDGER_APPROVALS,
                             LEDGER_AUTHORIZATIONS, LEDGER_DISPATCH, LEDGER_EFFECTS,
                             LEDGER_COMPENSATIONS, LEDGER_INTAKE, LEDGER_RESOLUTIONS)

DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://intentledger.dev/schemas/"
EFFECT_REQUESTS = "effects.requests"
"""Not a topic: the Kafka effect adapter's requests travel on each tool's own topic (the
registry's ``topic``), and this one schema, named for all of them, describes them."""


def identified(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": DIALECT, "$id": ID_BASE + name, **schema}


def proposals_schema() -> dict[str, Any]:
    """Inbound: raw JSON from agents, no envelope; ``format`` selects one of four shapes."""
    return identified(f"{AGENT_PROPOSALS}.schema.json", {
        "title": AGENT_PROPOSALS,
        "description": "A proposal from an agent: the generic form or a provider's own message "
                       "(OpenAI chat, OpenAI Responses, Anthropic), selected by `format`.",
        **INBOUND_PROPOSAL.json_schema(ref_template="#/$defs/{model}"),
    })


def results_schema() -> dict[str, Any]:
    """Outbound to agents: the intake's outcomes (ProposalOutcome), then the projection's
    ToolCallAwaitingApproval if the call waits for people, and ToolCallSettled once it
    settles."""
    return _enveloped(AGENT_RESULTS, "The intake's answer to one proposed tool call, then that "
                                     "it awaits approval (if it must), and the call's settled "
                                     "outcome; pair them with the call by `payload.call_id`, "
                                     "never by position.",
                      [ProposalOutcome, ToolCallSettled, ToolCallAwaitingApproval],
                      [{"if": _event_type_is(TOOL_CALL_SETTLED),
                        "then": _payload_is("ToolCallSettled"),
                        "else": {"if": _event_type_is(TOOL_CALL_AWAITING_APPROVAL),
                                 "then": _payload_is("ToolCallAwaitingApproval"),
                                 "else": _payload_is("ProposalOutcome")}},
                       *map(_outcome_agrees, OUTCOME_OF)],
                      event_types=[*OUTCOME_OF, TOOL_CALL_AWAITING_APPROVAL, TOOL_CALL_SETTLED])


def ledger_intake_schema() -> dict[str, Any]:
    """Internal: an accepted proposal carries the whole intent, the others their outcome."""
    others = [t for t in OUTCOME_OF if t != PROPOSAL_ACCEPTED]
    return _enveloped(LEDGER_INTAKE, "The intake's ledger events: a durable Intent for "
                                     "ProposalAccepted, the outcome for the other two.",
                      [ProposalOutcome, Intent], [
                          {"if": _event_type_is(PROPOSAL_ACCEPTED),
                           "then": _payload_is("Intent"), "else": _payload_is("ProposalOutcome")},
                          *map(_outcome_agrees, others)])


def approvals_schema() -> dict[str, Any]:
    """Inbound from operators: a decision whose kind agrees with its event type; from agents
    (through the MCP gateway): the withdrawal of a call awaiting approval."""
    decisions = {APPROVAL_GRANTED: "granted", APPROVAL_REFUSED: "refused"}
    return _enveloped(LEDGER_APPROVALS, "A person's decision on a call that needs approval, or "
                                        "the withdrawal of such a call by its own agent.",
                      [ApprovalDecision, CallWithdrawal],
                      [{"if": _event_type_is(CALL_WITHDRAWAL_REQUESTED),
                        "then": _payload_is("CallWithdrawal"),
                        "else": _payload_is("ApprovalDecision")}, *(
                          {"if": _event_type_is(kind), "then": {"properties": {"payload": {
                              "properties": {"decision": {"const": decision}}}}}}
                          for kind, decision in decisions.items())],
                      event_types=[*decisions, CALL_WITHDRAWAL_REQUESTED])


def resolutions_schema() -> dict[str, Any]:
    """Inbound from operators: a resolution of a call reconciliation could not settle, or a
    run's cancellation."""
    return _enveloped(LEDGER_RESOLUTIONS, "An operator settles by hand, with evidence, a call "
                                          "left RECONCILING or in MANUAL_REVIEW; or cancels a "
                                          "run.",
                      [Resolution, RunCancellation],
                      [{"if": _event_type_is(RUN_CANCELLATION_REQUESTED),
                        "then": _payload_is("RunCancellation"), "else": _payload_is("Resolution")}],
                      event_types=[RESOLUTION_REQUESTED, RUN_CANCELLATION_REQUESTED])


def compensations_schema() -> dict[str, Any]:
    """Internal, from the dispatcher to the policy: a compensation, sealed with its key."""
    return _enveloped(LEDGER_COMPENSATIONS, "A compensation the dispatcher proposes for a call "
                                            "of an aborted run, sealed with the dispatcher's key; "
                                            "the policy answers on ledger.authorizations.",
                      [CompensationProposal], [_payload_is("CompensationProposal")],
                      event_types=[COMPENSATION_PROPOSED])


def authorizations_schema() -> dict[str, Any]:
    """Internal, from the policy: each event type carries its own payload model."""
    payload_of = {AUTHORIZATION_ALLOWED: "Authorization", AUTHORIZATION_DENIED: "AuthorizationRefusal",
                  APPROVAL_REQUESTED: "ApprovalRequest"}
    return _enveloped(LEDGER_AUTHORIZATIONS, "The policy's decisions: an allow with its signed, "
                                             "expiring capability, a denial with its reason, or a "
                                             "request for approval.",
                      [Authorization, AuthorizationRefusal, ApprovalRequest],
                      [{"if": _event_type_is(kind), "then": _payload_is(model)}
                       for kind, model in payload_of.items()],
                      event_types=list(payload_of))


def dispatch_schema() -> dict[str, Any]:
    """Internal, from the dispatcher: every event is a CallEvent, named by what happened."""
    return _enveloped(LEDGER_DISPATCH, "The dispatcher's account of each call: intent recorded, "
                                       "attempts, unknown outcomes, reconciliation, results, "
                                       "refusals, compensations; each with the call's state and "
                                       "version after it, the worker and the fence.",
                      [CallEvent], [_payload_is("CallEvent")], event_types=list(DISPATCH_EVENTS))


def effects_schema() -> dict[str, Any]:
    """Outbound to any subscriber: effects that committed downstream."""
    return _enveloped(LEDGER_EFFECTS, "A business effect that committed downstream, with its "
                                      "audit trail (principal, policy version, worker, fence, "
                                      "attempt, receipt).",
                      [CommittedEffect], [_payload_is("CommittedEffect")],
                      event_types=[EFFECT_COMMITTED])


def effect_requests_schema() -> dict[str, Any]:
    """Outbound to downstream systems, on every Kafka-adapter tool's own topic."""
    payload_of = {EFFECT_REQUESTED: "EffectRequested", EFFECT_LOOKUP_REQUESTED: "EffectLookupRequested"}
    return _enveloped(EFFECT_REQUESTS, "What the dispatcher asks of a downstream system on a "
                                       "tool's topic (the registry's `topic`, e.g. effects.wallet): "
                                       "perform an effect keyed by its operation key, or say "
                                       "whether a key took effect.",
                      [EffectRequested, EffectLookupRequested],
                      [{"if": _event_type_is(kind), "then": _payload_is(model)}
                       for kind, model in payload_of.items()],
                      event_types=list(payload_of))


def effect_receipts_schema() -> dict[str, Any]:
    """Inbound from downstream systems: one receipt per effect request or lookup."""
    return _enveloped(EFFECT_RECEIPTS, "A downstream system's answer to one effect request or "
                                       "lookup: applied, rejected, not_found or stale.",
                      [EffectReceipt], [_payload_is("EffectReceipt")],
                      event_types=[EFFECT_RECEIPT_ISSUED])


def _enveloped(topic: str, description: str, payloads: list[type[BaseModel]],
               rules: list[dict[str, Any]], event_types: list[str] | None = None) -> dict[str, Any]:
    _, definitions = models_json_schema([(m, "validation") for m in (Envelope, *payloads)],
                                        ref_template="#/$defs/{model}")
    return identified(f"{topic}.schema.json", {
        "title": topic,
        "description": description,
        "$defs": _open_to_additions(definitions["$defs"]),
        "allOf": [{"$ref": "#/$defs/Envelope"},
                  {"properties": {"event_type": {"enum": event_types or list(OUTCOME_OF)}}},
                  *rules],
    })


def _open_to_additions(definitions: dict[str, Any]) -> dict[str, Any]:
    """Our models refuse unknown fields when *we* read them, but readers of what we publish
    must accept fields added within a major version (schemas/README.md), so the published
    outbound schemas leave objects open."""
    return {name: {key: value for key, value in schema.items() if key != "additionalProperties"}
            for name, schema in definitions.items()}


def _event_type_is(event_type: str) -> dict[str, Any]:
    return {"properties": {"event_type": {"const": event_type}}, "required": ["event_type"]}


def _payload_is(model: str) -> dict[str, Any]:
    return {"properties": {"payload": {"$ref": f"#/$defs/{model}"}}}


def _outcome_agrees(event_type: str) -> dict[str, Any]:
    payload = {"properties": {"outcome": {"const": OUTCOME_OF[event_type]}}}
    return {"if": _event_type_is(event_type), "then": {"properties": {"payload": payload}}}
