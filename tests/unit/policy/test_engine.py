"""``evaluate``: rules in order, first match wins, caps, approvals, limits; no I/O."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.policy import LimitUsage, evaluate
from shared.contracts.authorizations import PolicyReason

from .builders import APPROVAL, NOW, debit, email, grant, intent, policy, request, rule


def test_the_first_matching_rule_decides():
    call = debit()
    deny_first = policy(rule("stop", effect="deny"), rule("go"))
    allow_first = policy(rule("go"), rule("stop", effect="deny"))
    denied = evaluate(deny_first, request(call), None)
    assert (denied.effect, denied.rule, denied.reason) == ("deny", "stop", PolicyReason.DENIED_BY_RULE)
    allowed = evaluate(allow_first, request(call), None)
    assert (allowed.effect, allowed.rule, allowed.reason) == ("allow", "go", None)


def test_a_call_no_rule_matches_is_denied():
    decision = evaluate(policy(rule(tools=["email.*"])), request(debit()), None)
    assert (decision.effect, decision.rule, decision.reason) == ("deny", None, PolicyReason.NO_MATCHING_RULE)


@pytest.mark.parametrize("field, patterns, matched", [
    ("principals", ["agent-?"], True),
    ("principals", ["agent-8"], False),
    ("principals", ["AGENT-7"], False),  # case-sensitive
    ("tenants", ["ac*"], True),
    ("tenants", ["globex"], False),
    ("tools", ["wallet.*"], True),
    ("tools", ["wallet.refund", "email.send"], False),
    ("actions", ["debit"], True),
    ("actions", ["refund"], False),
])
def test_a_rule_matches_on_glob_patterns(field, patterns, matched):
    decision = evaluate(policy(rule("only", **{field: patterns})), request(debit()), None)
    assert (decision.rule == "only") is matched


@pytest.mark.parametrize("wallet, resources, matched", [
    ("vip-1", ["tenant/acme/vip-*"], True),
    ("w-1", ["tenant/acme/vip-*"], False),
    ("w-1", ["tenant/globex/*"], False),
])
def test_a_rule_matches_on_a_canonical_resource(wallet, resources, matched):
    vip = rule("vip", resource_path="wallet_id", resources=resources)
    decision = evaluate(policy(vip), request(debit(wallet=wallet)), None)
    assert (decision.rule == "vip") is matched


def test_a_resource_rule_does_not_match_a_call_without_that_argument():
    vip = rule("vip", resource_path="wallet_id", resources=["*"])
    assert evaluate(policy(vip), request(email()), None).reason == PolicyReason.NO_MATCHING_RULE


CAPPED = {"max_amount_minor": 5000, "currency": "EUR"}


@pytest.mark.parametrize("amount", ["40.00", "50.00"])
def test_an_amount_up_to_the_cap_is_allowed_and_the_cap_is_recorded(amount):
    decision = evaluate(policy(rule("capped", **CAPPED)), request(debit(amount)), None)
    assert decision.effect == "allow"
    assert decision.limits["cap"] == {"max_amount_minor": 5000, "currency": "EUR",
                                      "amount_minor": int(float(amount) * 100), "amount_currency": "EUR"}


def test_an_amount_over_the_cap_is_denied_by_default():
    decision = evaluate(policy(rule("capped", **CAPPED)), request(debit("50.01")), None)
    assert (decision.effect, decision.reason) == ("deny", PolicyReason.AMOUNT_OVER_CAP)


def test_an_amount_over_the_cap_can_require_approval_instead():
    capped = rule("capped", **CAPPED, over_cap="require_approval", approval=APPROVAL)
    decision = evaluate(policy(capped), request(debit("99.00")), None)
    assert decision.effect == "require_approval"
    assert decision.approval.quorum == 1 and decision.approval.approvers == ("operator:*",)
    assert evaluate(policy(capped), request(debit("10.00")), None).effect == "allow"


def test_a_call_in_another_currency_than_the_cap_is_denied():
    decision = evaluate(policy(rule("capped", **CAPPED)), request(debit("1.00", "USD")), None)
    assert (decision.effect, decision.reason) == ("deny", PolicyReason.CAP_CURRENCY_MISMATCH)


def test_a_capped_rule_allows_a_tool_that_moves_no_money():
    reserve = intent("inventory.reserve", {"sku": "s-1", "order_id": "o-1", "quantity": 2})
    assert evaluate(policy(rule("capped", **CAPPED)), request(reserve), None).effect == "allow"


def test_a_call_past_its_deadline_is_denied_whatever_the_rules_say():
    late = debit(deadline_at=NOW - timedelta(seconds=1))
    decision = evaluate(policy(rule()), request(late), None)
    assert (decision.effect, decision.reason) == ("deny", PolicyReason.DEADLINE_PASSED)
    assert evaluate(policy(rule()), request(debit(deadline_at=None)), None).effect == "allow"


EMAIL_RULE = rule("mail", tools=["email.send"], effect="require_approval", approval=APPROVAL)


def test_a_require_approval_rule_asks_for_approval():
    decision = evaluate(policy(EMAIL_RULE), request(email()), None)
    assert (decision.effect, decision.rule, decision.approvals) == ("require_approval", "mail", ())


def test_a_quorum_of_valid_approvals_allows_and_names_them():
    approval = grant("operator:dana")
    decision = evaluate(policy(EMAIL_RULE), request(email(), approval), None)
    assert decision.effect == "allow" and decision.approvals == (approval,)


@pytest.mark.parametrize("approval", [
    grant("agent-7"),                                   # the requester
    grant("intern:bob"),                                # not among the rule's approvers
    grant("operator:dana", expires_at=NOW),             # expired
], ids=["requester", "not an approver", "expired"])
def test_an_approval_that_may_not_count_does_not(approval):
    requester_may = rule("mail", tools=["email.send"], effect="require_approval",
                         approval=APPROVAL | {"approvers": ["operator:*", "agent-*"]})
    decision = evaluate(policy(requester_may), request(email(), approval), None)
    assert decision.effect == "require_approval"


def test_the_person_a_gateway_proposed_for_counts_as_the_requester():
    """A grant by that person (recorded before the approval check refused it, say) is not
    counted, and that person may not resolve the call either."""
    from shared.policy import resolution_rule

    asked = email().model_copy(update={"person_id": "operator:dana"})
    by_the_person = evaluate(policy(EMAIL_RULE), request(asked, grant("operator:dana")), None)
    by_another = evaluate(policy(EMAIL_RULE), request(asked, grant("operator:eve")), None)
    assert (by_the_person.effect, by_another.effect) == ("require_approval", "allow")
    anyone = policy(rule(), resolutions=({"name": "any", "operators": ["*"], "tenants": ["*"],
                                          "tools": ["*"]},))
    assert resolution_rule(anyone, "operator:dana", asked, "failed") is None
    assert resolution_rule(anyone, "operator:eve", asked, "failed") == "any"


def test_the_same_approver_twice_counts_once():
    two = rule("mail", tools=["email.send"], effect="require_approval",
               approval=APPROVAL | {"quorum": 2})
    once = evaluate(policy(two), request(email(), grant("operator:dana"), grant("operator:dana")), None)
    assert once.effect == "require_approval"
    both = evaluate(policy(two), request(email(), grant("operator:dana"), grant("operator:eve")), None)
    assert both.effect == "allow" and len(both.approvals) == 2


RATE = {"name": "rate", "scope": "principal", "tools": ["wallet.*"], "window_seconds": 60,
        "max_calls": 3}
VELOCITY = {"name": "velocity", "scope": "tenant", "tools": ["wallet.debit"],
            "window_seconds": 3600, "max_amount_minor": 10000, "currency": "EUR"}


def test_a_call_over_a_rate_limit_is_denied():
    limited = policy(rule(), limits=(RATE,))
    assert evaluate(limited, request(debit()), {"rate": LimitUsage(calls=2)}).effect == "allow"
    decision = evaluate(limited, request(debit()), {"rate": LimitUsage(calls=3)})
    assert (decision.effect, decision.reason) == ("deny", PolicyReason.RATE_LIMITED)
    assert decision.limits["windows"][0]["calls_before"] == 3


def test_a_call_over_a_velocity_limit_is_denied():
    limited = policy(rule(), limits=(VELOCITY,))
    fits = evaluate(limited, request(debit("40.00")), {"velocity": LimitUsage(1, 6000)})
    assert fits.effect == "allow"
    assert fits.limits["windows"] == [{
        "name": "velocity", "scope": "tenant", "window_seconds": 3600, "max_calls": None,
        "max_amount_minor": 10000, "currency": "EUR", "calls_before": 1, "amount_minor_before": 6000}]
    over = evaluate(limited, request(debit("40.01")), {"velocity": LimitUsage(1, 6000)})
    assert (over.effect, over.reason) == ("deny", PolicyReason.VELOCITY_LIMITED)


def test_a_velocity_limit_counts_its_own_currency_only():
    limited = policy(rule(), limits=(VELOCITY,))
    assert evaluate(limited, request(debit("400.00", "USD")),
                    {"velocity": LimitUsage(1, 9999)}).effect == "allow"


def test_limits_apply_only_to_the_tools_they_name_and_to_allows():
    limited = policy(rule(), EMAIL_RULE, limits=(RATE,))
    assert evaluate(limited, request(intent("inventory.reserve", {
        "sku": "s", "order_id": "o", "quantity": 1})), {}).effect == "allow"
    mail = policy(EMAIL_RULE, limits=(RATE | {"tools": ["*"], "max_calls": 0},))
    assert evaluate(mail, request(email()), {"rate": LimitUsage()}).effect == "require_approval"
    assert evaluate(mail, request(email(), grant()),
                    {"rate": LimitUsage()}).reason == PolicyReason.RATE_LIMITED


def test_without_usage_limits_are_skipped_as_the_dispatcher_asks():
    limited = policy(rule(), limits=(RATE,))
    decision = evaluate(limited, request(debit()), None)
    assert decision.effect == "allow" and "windows" not in decision.limits


def test_usage_that_leaves_out_an_applicable_limit_is_a_bug_not_a_pass():
    with pytest.raises(ValueError, match="rate"):
        evaluate(policy(rule(), limits=(RATE,)), request(debit()), {})


def test_a_decision_names_its_policy_version_and_capability_lifetime():
    chosen = policy(rule(), capability_ttl_seconds=60)
    decision = evaluate(chosen, request(debit()), None)
    assert decision.policy_version == chosen.version and decision.capability_ttl_seconds == 60


def test_no_rule_lets_an_irreversible_tool_out_without_approval():
    """email.send is irreversible (requires_approval in the registry): an allow rule still
    needs its approvers, and a rule naming none denies."""
    with_approvers = policy(rule("mail", tools=["email.send"], approval=APPROVAL))
    waiting = evaluate(with_approvers, request(email()), None)
    assert (waiting.effect, waiting.approval) == ("require_approval", with_approvers.rules[0].approval)
    approved = evaluate(with_approvers, request(email(), grant()), None)
    assert approved.effect == "allow" and len(approved.approvals) == 1
    without = evaluate(policy(rule("mail", tools=["email.send"])), request(email()), None)
    assert (without.effect, without.reason) == ("deny", PolicyReason.NO_APPROVERS_FOR_TOOL)


def test_only_a_named_operator_other_than_the_requester_may_resolve_a_call():
    from shared.policy import resolution_rule

    resolutions = policy(rule(), resolutions=({"name": "ops", "operators": ["operator:*"],
                                       "tenants": ["acme"], "tools": ["wallet.*"],
                                       "outcomes": ["succeeded"]},))
    call = debit()
    assert resolution_rule(resolutions, "operator:dana", call, "succeeded") == "ops"
    assert resolution_rule(resolutions, "operator:dana", call, "failed") is None
    assert resolution_rule(resolutions, "agent-9", call, "succeeded") is None
    anyone = policy(rule(), resolutions=({"name": "any", "operators": ["*"], "tenants": ["*"],
                                      "tools": ["*"]},))
    assert resolution_rule(anyone, "agent-9", call, "failed") == "any"
    assert resolution_rule(anyone, call.principal_id, call, "failed") is None  # never the requester
    assert resolution_rule(policy(rule()), "operator:dana", call, "succeeded") is None
