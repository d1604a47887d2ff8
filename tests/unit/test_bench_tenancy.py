"""The benchmark's tenants (``--tenants``): the policy written for them lets each tenant's
principal debit its own tenant's wallets and nothing of another tenant's, the load deals every
run to one tenant with that tenant's principal and wallets, and an answer on another tenant's
results topic is counted against the run."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from bench.e2e.answers import Answers
from bench.e2e.config import parse_config
from bench.e2e.load import Load
from bench.e2e.names import RunNames
from bench.e2e.pipeline import POLICY_FILE, TOOLS_FILE
from bench.e2e.proposals import Proposals
from bench.e2e.tenancy import principal_of, tenants, write_policy
from shared.contracts.intake import PROPOSAL_ACCEPTED, Intent
from shared.policy.engine import Effect, Request, evaluate
from shared.policy.loader import load_policy
from shared.tools import load_registry
from shared.topology import results_topic

DEBIT = load_registry(TOOLS_FILE).resolve("wallet.debit", None)


def decide(policy, principal: str, tenant: str, wallet_id: str) -> Effect:
    intent = Intent(run_id="r", provider="generic", provider_call_id="c",
                    logical_call_id="0190a000-0000-7000-8000-000000000000", operation_key="k",
                    tool_name=DEBIT.name, tool_version=DEBIT.version, arguments_hash="h",
                    canonical_arguments={"wallet_id": wallet_id, "amount": 100,
                                         "currency": "EUR"},
                    principal_id=principal, tenant_id=tenant,
                    deadline_at=datetime.now(UTC) + timedelta(minutes=5))
    return evaluate(policy, Request.of(intent, DEBIT, datetime.now(UTC)), None).effect


def test_each_tenants_principal_debits_its_own_wallets_and_no_others(tmp_path):
    ids = tenants(3)
    assert ids == ["bench", "bench-2", "bench-3"]
    policy = load_policy(write_policy(POLICY_FILE, ids, tmp_path / "policy.yaml"))
    for tenant in ids:
        assert decide(policy, principal_of(tenant), tenant, f"tenant/{tenant}/w1") == "allow"
    assert decide(policy, "agent-7-2", "bench-2", "tenant/bench/w1") == "deny"
    assert decide(policy, "agent-7-2", "bench", "tenant/bench/w1") == "deny"
    assert decide(policy, "agent-7", "bench-3", "tenant/bench-3/w1") == "deny"


def test_one_tenant_is_the_bench_policy_as_written(tmp_path):
    written = load_policy(write_policy(POLICY_FILE, tenants(1), tmp_path / "policy.yaml"))
    assert written.rules == load_policy(POLICY_FILE).rules
    assert written.resolutions == load_policy(POLICY_FILE).resolutions


def test_tenants_out_of_range_are_refused():
    with pytest.raises(ValueError):
        tenants(0)


def test_every_run_belongs_to_one_tenant_with_its_principal_and_wallets():
    config = parse_config(["--tenants", "3", "--wallets", "30", "--active-runs", "8"])
    names = RunNames(config.wallets, tenants(config.tenants))
    load = Load(config, names, Proposals(), "localhost:1", None)
    runs: dict[str, set[str]] = {}
    wallets: Counter[str] = Counter()
    for i in range(240):
        message = json.loads(load._proposal(i)[1])
        tenant = message["tenant_id"]
        assert tenant == load.tenant_of(i)
        assert message["principal_id"] == principal_of(tenant)
        wallet = load.arguments(i)["wallet_id"]
        assert wallet.startswith(f"tenant/{tenant}/")
        runs.setdefault(message["run_id"], set()).add(tenant)
        wallets[wallet] += 1
    assert all(len(owners) == 1 for owners in runs.values())
    assert set().union(*runs.values()) == set(names.tenants)
    assert set(wallets) == set(names.wallet_ids) and len(names.wallet_ids) == 30


def test_an_answer_on_another_tenants_topic_counts_against_the_run():
    names = RunNames(10, tenants(2))
    proposals = Proposals()
    for _ in range(2):
        proposals.published(0)
    tenant_of = ["bench", "bench-2"].__getitem__
    answers = Answers(names, proposals, "localhost:1", tenant_of)

    def answer(i: int, topic: str) -> SimpleNamespace:
        envelope = {"event_type": PROPOSAL_ACCEPTED, "payload": {"call_id": names.call_id(i)}}
        return SimpleNamespace(topic=topic, value=json.dumps(envelope).encode())

    answers._answer(answer(0, results_topic("bench")), 1.0)
    answers._answer(answer(1, results_topic("bench")), 1.0)
    assert proposals.accepted == 1
    assert proposals.answers["wrong_tenant"] == 1
