"""The policy file: what loads, what is refused (with the place), and what makes a new version."""

from __future__ import annotations

import pytest
import yaml

from shared.policy import PolicyError, load_policy, parse_policy
from shared.contracts.authorizations import PolicyReason
from shared.policy import evaluate

from .builders import EXAMPLE_POLICY, debit, email, grant, request

EXAMPLE = EXAMPLE_POLICY.read_text(encoding="utf-8")


def test_the_example_policy_serves_the_demo_tenant():
    policy = load_policy(EXAMPLE_POLICY)
    assert evaluate(policy, request(debit("40.00")), None).effect == "allow"
    assert evaluate(policy, request(debit("600.00")), None).effect == "require_approval"
    assert evaluate(policy, request(email()), None).effect == "require_approval"
    assert evaluate(policy, request(email(), grant("operator:dana")), None).effect == "allow"
    assert evaluate(policy, request(debit(principal="agent-9")), None).reason == PolicyReason.DENIED_BY_RULE
    assert evaluate(policy, request(debit(tenant="globex")), None).reason == PolicyReason.NO_MATCHING_RULE


def test_the_version_ignores_layout_and_comments():
    reflowed = yaml.safe_dump(yaml.safe_load(EXAMPLE), default_flow_style=True, sort_keys=True)
    assert parse_policy(reflowed).version == parse_policy(EXAMPLE).version
    assert parse_policy("# a comment\n" + EXAMPLE).version == parse_policy(EXAMPLE).version


def test_spelling_out_a_default_is_not_a_new_version():
    document = yaml.safe_load(EXAMPLE)
    document["rules"][1]["over_cap"] = "deny"
    assert parse_policy(yaml.safe_dump(document)).version == parse_policy(EXAMPLE).version


@pytest.mark.parametrize("change", [
    lambda d: d["rules"][0].update(max_amount_minor=50001),
    lambda d: d["rules"].reverse(),
    lambda d: d["limits"][0].update(window_seconds=61),
    lambda d: d.update(capability_ttl_seconds=301),
], ids=["cap", "order", "window", "ttl"])
def test_any_change_of_meaning_is_a_new_version(change):
    document = yaml.safe_load(EXAMPLE)
    change(document)
    changed = parse_policy(yaml.safe_dump(document))
    assert changed.version != parse_policy(EXAMPLE).version
    assert len(changed.version) == 16 and int(changed.version, 16) >= 0


RULE = "rules:\n  - {name: r, principals: ['*'], tenants: ['*'], tools: ['*'], "


@pytest.mark.parametrize("text, where", [
    (RULE + "effect: allow, effect: deny}\n", "repeated key 'effect'"),
    (RULE + "effect: allow, max_amount_minr: 5}\n", "rules[0] (r).max_amount_minr"),
    (RULE + "effect: require_approval}\n", "needs an approval block"),
    (RULE + "effect: deny, approval: {approvers: ['*']}}\n", "a deny rule has no cap and no approval"),
    (RULE + "effect: allow, max_amount_minor: 5}\n", "max_amount_minor and currency"),
    (RULE + "effect: allow, max_amount_minor: 5, currency: eur}\n", "currency"),
    (RULE + "effect: allow, resource_path: 'to[]', resources: ['*']}\n", "one value, not a list"),
    (RULE + "effect: allow, resource_path: wallet_id}\n", "resource_path and resources"),
    (RULE + "effect: maybe}\n", "rules[0] (r).effect"),
    (RULE + "effect: allow}\n  - {name: r, principals: ['*'], tenants: ['*'], tools: ['*'], "
     "effect: deny}\n", "rule names repeat: r"),
    (RULE + "effect: allow}\nlimits:\n  - {name: l, scope: tenant, tools: ['*'], "
     "window_seconds: 60}\n", "needs max_calls, max_amount_minor or both"),
    ("rules: [\n", "not valid YAML"),
    ("- just a list\n", "expected a mapping"),
    ("rules: []\nextra: 1\n", "extra"),
])
def test_a_bad_policy_is_refused_with_the_place_and_the_reason(text, where):
    with pytest.raises(PolicyError) as refused:
        parse_policy(text, "policy.yaml")
    assert str(refused.value).startswith("policy.yaml: ") and where in str(refused.value)


def test_a_missing_file_is_refused_with_its_name(tmp_path):
    with pytest.raises(PolicyError, match="cannot read the policy"):
        load_policy(tmp_path / "absent.yaml")


def test_a_policy_naming_its_resolutions_by_either_name_means_the_same_with_the_same_version():
    """``repairs:`` was the section's name before ``resolutions:``: both read the same, and an
    unchanged file keeps the version 0.1.0 gave it (decisions and capabilities name it)."""
    document = yaml.safe_load(EXAMPLE)
    assert "repairs" in document  # the shipped file keeps the name 0.1.0 pods can read
    renamed = dict(document, resolutions=document["repairs"])
    del renamed["repairs"]
    new = parse_policy(yaml.safe_dump(renamed))
    assert new.resolutions == parse_policy(EXAMPLE).resolutions != ()
    assert new.version == parse_policy(EXAMPLE).version == "e386d42a4427fdae"  # 0.1.0's
