"""Every stable reason code an agent can meet, with where it comes from and what it means.

The codes are the members of seven enums: four in the order the intake checks a proposal (who
signed it, ``IdentityReason``, before anything in it is read),
then the policy's (``PolicyReason``: why a call was denied or an approval did not count), then
the dispatcher's (``DispatchReason``: why a call was not dispatched, failed or needs a
person), then a downstream's (``CapabilityReason``: why an effect request's capability was
refused, answered ``rejected``).
``RejectionCode`` documents its codes in its module's table, which is read from there;
the other enums have no per-code text, so it is kept here, and
``tests/unit/test_contract_schemas.py`` fails when an enum and this catalog disagree.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from shared.contracts.proposals import ReasonCode
from shared.contracts.intake import IntakeReason
from shared.contracts.authorizations import PolicyReason
from shared.contracts.dispatch import DispatchReason
from shared.downstream.capability_check import CapabilityReason
from shared.identity.signatures import CLOCK_SKEW_S, MAX_LIFETIME_S, IdentityReason
from shared.tools import rejections
from shared.tools.rejections import RejectionCode

_CAPABILITY_REASON = {
    "capability_missing": "a downstream refused an effect request that carries no capability "
                          "(and is not a compensation); nothing was applied",
    "capability_signature_invalid": "the capability's signature does not match its fields; "
                                    "nothing was dispatched",
    "capability_key_unknown": "the capability is signed by a key (kid) outside the policy's "
                              "public key set, e.g. rotated out; nothing was dispatched",
    "capability_not_for_this_request": "a downstream refused an effect request whose "
                                       "capability names another key, call, tool or arguments",
    "capability_tenant_not_served": "a downstream refused a capability for a tenant it does "
                                    "not serve; nothing was applied",
    "capability_expired": "the capability expired before the call could be dispatched",
}
_DEAD = "dead-lettered with this code, never answered"
_IDENTITY_REASON = {
    "signature_missing": "the record has no intentledger-signature header (and its tenant does "
                         "not accept unsigned proposals)",
    "signature_malformed": "the header is not one detached compact JWS with every claim of its "
                           "type, or uses an algorithm other than Ed25519, EdDSA or ES256",
    "signing_key_unknown": "no principal in the principals file has the signature's kid",
    "signing_key_revoked": "the signing key was revoked before now",
    "signing_key_not_valid": "now is outside the signing key's not_before / not_after",
    "signature_invalid": "the signature does not hold over the record's exact bytes, or names "
                         "another principal than the key's owner",
    "signature_expired": f"now is more than {CLOCK_SKEW_S} s past the signature's exp",
    "signature_not_yet_valid": f"the signature's iat is more than {CLOCK_SKEW_S} s ahead of now",
    "signature_lifetime_too_long": f"exp - iat is more than {MAX_LIFETIME_S} s",
    "signature_for_another_use": "the signature's typ is for another kind of record (an "
                                 "approval's signature on a proposal)",
    "tenant_not_allowed_for_principal": "the signer may not act for the tenant it signed for",
    "signature_principal_mismatch": "the record (a call, an approval's approver, a resolution's "
                                    "operator) names another principal than the one who acts",
    "signature_tenant_mismatch": "a call in the record names another tenant than the one signed for",
    "principal_lacks_role": "the one who acts (the signer, or the person a console signs for) "
                            "lacks the role the record needs: approver, or operator",
    "signer_not_publisher_for_people": "the signature names a person to act for, and its signer "
                                       "lacks the role publishes-for-people",
    "person_unknown": "the signature names a person the principals file does not list",
    "signer_not_proposer_for_others": "the signature names a principal to propose as (agent), "
                                      "and its signer lacks the role proposes-for-others",
    "delegate_unknown": "the signature names a principal to propose as that the principals "
                        "file does not list",
}
_REASON_CODE = {
    "too_large": f"the record exceeds the byte limit (256 KiB by default); {_DEAD}",
    "not_utf8": f"the record is not valid UTF-8; {_DEAD}",
    "not_json": f"the record is not JSON; {_DEAD}",
    "too_deep": "arrays and objects nested beyond the depth limit (32 by default)",
    "duplicate_key": "a JSON object repeats a key, so no reader could tell which value counts",
    "string_too_long": "a key or string value beyond the length limit (65,536 characters by default)",
    "array_too_long": "an array beyond the item limit (1,024 by default)",
    "integer_out_of_range": "an integer, or an amount in minor units, beyond ±(2^53−1): JSON "
                            "numbers cannot carry it exactly, so it must be sent as a string",
    "number_out_of_range": "a number that overflows an IEEE 754 double",
    "not_finite": "NaN or Infinity spelt in the JSON text, which has no such numbers",
    "invalid_string": "a string holding NUL (U+0000) or a lone UTF-16 surrogate",
    "unknown_format": "`format` is missing or not generic, openai.chat, openai.responses or anthropic",
    "unknown_field": "a field our part of the message does not define (provider objects may "
                     "carry extra fields)",
    "missing_field": "a required field is absent",
    "invalid_field": "a field has the wrong type or an invalid value",
    "invalid_tenant_id": "the tenant id is not 1-63 lowercase letters, digits and '-' (not "
                         "starting or ending with '-'): it must name the tenant's results "
                         "topic agent.results.<tenant>; answered on the signer's tenant's "
                         "topic, or dead-lettered when there is none",
    "no_tool_calls": "the message carries no tool call",
    "too_many_calls": "the message carries more tool calls than one message may (the intake's "
                      "limits.max_calls): send the rest in another",
    "duplicate_call_id": "two tool calls in one message share a call id",
    "arguments_not_json": "a call's arguments text is not JSON, or not a JSON object",
    "unsupported_call_type": "a tool call other than a function call (e.g. an OpenAI custom tool call)",
    "call_incomplete": "a Responses function_call not completed, or Anthropic tool_use blocks "
                       "that a stop_reason such as max_tokens may have cut short",
    "operation_key_ambiguous": "both operation_key and operation_keys, or one operation_key "
                               "for several calls",
    "operation_key_unmatched": "operation_keys names a call id the message does not carry",
}
_INTAKE_REASON = {
    "operation_key_conflict": "the operation key already names an intent with other canonical "
                              "arguments",
    "operation_key_expired": "the operation key named an intent whose record the ledger no "
                             "longer keeps (the tool's ledger_key_retention_seconds); it is never "
                             "executed again: logical_call_id names that intent to the "
                             "principal that proposed it",
    "operation_key_in_use": "the operation key names an intent another principal (or another "
                            "person through the same agent) proposed: it takes effect once, and "
                            "only its proposer is told what it came to",
    "provider_call_id_reused": "the provider call id already names another intent in this run",
    "run_deadline_passed": "the run's deadline has passed",
    "run_principal_mismatch": "the run belongs to another principal (or another person "
                              "through the same agent)",
    "run_call_budget_exhausted": "the run already has its maximum number of intents",
    "run_cost_budget_exhausted": "the call's cost would take the run past its cost budget",
    "run_cost_currency_mismatch": "the call costs money in another currency than the run's budget",
    "proposal_rate_exceeded": "the tenant or the principal has spent its proposal rate; nothing "
                              "was recorded, send the message again after retry_after_s",
    "internal_error": "the intake could not record the call; nothing was dispatched (see its logs)",
}
_RUN_CANCELLED = ("an operator cancelled the run: nothing more of it is dispatched and no call of "
                  "it waits for approval (a call already sent settles with its true outcome); "
                  "done steps are compensated only if the operator asked")
_POLICY_REASON = {
    "no_matching_rule": "no policy rule matches the call's principal, tenant, tool and resource",
    "denied_by_rule": "the first policy rule that matches the call denies it",
    "amount_over_cap": "the call's amount exceeds its rule's cap",
    "cap_currency_mismatch": "the call moves money in another currency than its rule's cap",
    "rate_limited": "a rate limit's window already holds its maximum number of allowed calls",
    "velocity_limited": "the call's amount would take a velocity limit's window past its maximum",
    "deadline_passed": "the intent's deadline passed before the policy decided",
    "tool_not_in_registry": "the policy service's tool registry lacks the call's tool and "
                            "version (the deployment's registries disagree)",
    "approval_refused": "an approver the rule names refused the call",
    "approval_request_expired": "the approval request lapsed without a quorum (or an approval "
                                "arrived after it lapsed)",
    "approval_not_pending": "an approval for a call that is not awaiting approval; it counts nothing",
    "approval_not_for_this_call": "an approval whose run, tenant or operation key is not the call's",
    "approval_for_other_arguments": "an approval whose arguments_hash is not the intent's",
    "approver_is_requester": "an approval by the principal that proposed the call, or by the "
                             "person it proposed the call for",
    "approver_not_allowed": "an approval by someone the rule's approvers do not include",
    "approval_expired": "a grant without expires_at, or already expired when it arrived",
    "approver_already_counted": "a second grant by an approver who already counts; it counts once",
    "no_approvers_for_tool": "the tool requires approval (the registry says so, e.g. irreversible "
                             "tools) but the matching rule names no approvers",
    "run_cancelled": _RUN_CANCELLED,
    "call_withdrawn": "the agent that proposed the call withdrew it while it awaited approval "
                      "(an MCP client's tasks/cancel): nothing was dispatched",
}


def _documented_table(doc: str) -> dict[str, str]:
    """The ``code  meaning`` rows of a reStructuredText simple table in a docstring."""
    lines = doc.splitlines()
    borders = [i for i, line in enumerate(lines) if re.fullmatch(r"=+ +=+", line)]
    column = lines[borders[0]].index(" =") + 1
    table: dict[str, str] = {}
    for line in lines[borders[0] + 1:borders[1]]:
        if line[:1].strip():
            code = line.split()[0]
            table[code] = line[column:].strip()
        else:
            table[code] += " " + line.strip()
    return {code: text.replace("``", "`") for code, text in table.items()}


_DISPATCH_REASON = {
    "approval_missing": "the tool requires approval (irreversible) and the capability carries none",
    "capability_signature_invalid": "the capability's signature does not match its fields; "
                                    "nothing was dispatched",
    "capability_key_unknown": "the capability is signed by a key (kid) outside the policy's "
                              "public key set, e.g. rotated out; nothing was dispatched",
    "capability_not_for_this_intent": "the capability names another intent (call, key, tool, "
                                      "principal, tenant or arguments)",
    "capability_expired": "the capability expired before the call could be dispatched",
    "approval_expired": "an approval the capability relies on expired before dispatch",
    "policy_changed_to_deny": "the policy in force at dispatch denies what an older version allowed",
    "policy_changed_requires_approval": "the policy in force at dispatch requires approvals the "
                                        "call does not have",
    "run_attempt_budget_exhausted": "the run has used all its attempts",
    "call_attempt_budget_exhausted": "every attempt the tool's contract allows was made and "
                                     "confirmed not applied",
    "run_deadline_passed": "no time is left before the run's deadline (minus the recovery reserve)",
    "run_aborted": "an earlier step of the run failed: nothing more is dispatched, done steps "
                   "are compensated",
    "run_cancelled": _RUN_CANCELLED,
    "unknown_tool": "the dispatcher's registry no longer declares the call's tool and version",
    "rejected_by_tool": "the downstream system confirmed it applied nothing (its reason is in "
                        "the event's detail)",
    "result_invalid": "the effect happened but its result broke the tool's result schema or "
                      "size limit; a person must look",
    "no_reconciliation_path": "the outcome is unknown and the tool offers no lookup and no "
                              "safe replay; a person must look",
    "reconciliation_budget_exhausted": "lookups by operation key went unanswered; a person must look",
    "downstream_key_expired": "the outcome is unknown and the downstream may have forgotten the "
                              "operation key (the tool's key_retention_seconds): a resend could "
                              "apply the effect again and a lookup's not found proves nothing; a "
                              "person must look",
    "compensation_not_authorized": "the policy in force does not allow the compensating call",
    "compensation_arguments_missing": "the compensating call's arguments cannot be built from "
                                      "the original call's arguments and result",
    "resolved_by_operator": "an operator settled the call by hand, with evidence (the event "
                            "names them)",
    "repair_not_authorized": "the policy's resolutions do not let this operator settle this call "
                             "this way (and never the call's own principal)",
    "call_not_unresolved": "a resolution arrived for a call that is not RECONCILING or in "
                           "MANUAL_REVIEW",
}

SOURCES: tuple[tuple[type[StrEnum], dict[str, str]], ...] = (
    (IdentityReason, _IDENTITY_REASON),
    (ReasonCode, _REASON_CODE),
    (RejectionCode, _documented_table(rejections.__doc__ or "")),
    (IntakeReason, _INTAKE_REASON),
    (PolicyReason, _POLICY_REASON),
    (DispatchReason, _DISPATCH_REASON),
    (CapabilityReason, _CAPABILITY_REASON),
)


def reason_codes() -> dict[str, Any]:
    """Code → meaning and sources; a code two enums share keeps the first meaning."""
    codes: dict[str, dict[str, Any]] = {}
    for enum, meanings in SOURCES:
        source = f"{enum.__module__}.{enum.__qualname__}"
        for member in enum:
            entry = codes.setdefault(member.value, {"meaning": meanings[member.value], "sources": []})
            entry["sources"].append(source)
    return codes
