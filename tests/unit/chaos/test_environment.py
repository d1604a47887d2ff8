"""What a protocol sets reaches the settings each service reads, under their real names."""

from __future__ import annotations

from pathlib import Path

from intentledger.chaos.environment import rule_text, service_env
from services.dispatcher.settings import DispatcherSettings
from services.policy.settings import PolicySettings
from services.proposal_intake.settings import IntakeSettings
from shared.contracts.fault_protocol import FaultProtocol
from shared.faults import parse_rules

PROTOCOL = FaultProtocol.model_validate({
    "name": "p", "guards": "g", "seed": 1, "policy_file": "policies/standard.yaml",
    "tools_file": "tools/http-wallet.yaml",
    "limits": {"run_seconds": 14, "run_calls": 1, "run_attempts": 2, "lookups": 3,
               "lease_ttl_s": 2.5, "recovery_reserve_s": 3},
    "services": {"wallet": {"env": {"INTENTLEDGER_WALLET_HTTP_PORT": "18231"}}},
    "proposals": [{"name": "debit", "tool": "wallet.debit", "arguments": {}}],
    "faults": [{"kind": "inject", "id": "crash", "service": "dispatcher",
                "point": "dispatcher.after_send_before_record", "action": "exit", "hit": 2},
               {"kind": "inject", "id": "slow", "service": "wallet", "point": "wallet.delay",
                "action": "delay", "seconds": 7, "hit": None}],
    "assertions": [{"fact": "business_effects", "call": "debit", "value": 1}],
})
HERE = Path("/protocols/p.json")


def settings(model, env: dict[str, str], monkeypatch):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return model()


def test_limits_reach_the_intake_and_the_dispatcher(monkeypatch):
    intake = settings(IntakeSettings, service_env(PROTOCOL, HERE, "proposal-intake", []), monkeypatch)
    assert (intake.default_run_seconds, intake.default_max_calls, intake.default_max_attempts) == (
        14, 1, 2)
    dispatcher = settings(DispatcherSettings, service_env(PROTOCOL, HERE, "dispatcher", []),
                          monkeypatch)
    assert (dispatcher.lease_ttl_s, dispatcher.max_lookups, dispatcher.recovery_reserve_s) == (
        2.5, 3, 3)


def test_policy_and_registry_are_resolved_beside_the_protocol(monkeypatch):
    policy = settings(PolicySettings, service_env(PROTOCOL, HERE, "policy", []), monkeypatch)
    assert policy.policy_file == Path("/protocols/policies/standard.yaml")
    assert policy.tools_file == Path("/protocols/tools/http-wallet.yaml")
    dispatcher = settings(DispatcherSettings, service_env(PROTOCOL, HERE, "dispatcher", []),
                          monkeypatch)
    assert dispatcher.policy_file == policy.policy_file
    assert dispatcher.tools_file == policy.tools_file


def test_service_tuning_and_armed_faults_are_passed_as_they_are():
    crash, slow = PROTOCOL.faults
    assert service_env(PROTOCOL, HERE, "wallet", [slow]) == {
        "INTENTLEDGER_WALLET_HTTP_PORT": "18231", "INTENTLEDGER_FAULTS": "wallet.delay=delay:7.0"}
    assert "INTENTLEDGER_FAULTS" not in service_env(PROTOCOL, HERE, "wallet", [])


def test_fault_rules_are_understood_by_the_services():
    crash, slow = PROTOCOL.faults
    rules = parse_rules(",".join(map(rule_text, [crash, slow])))
    assert (rules[crash.point].action, rules[crash.point].nth) == ("exit", 2)
    assert (rules[slow.point].action, rules[slow.point].argument, rules[slow.point].nth) == (
        "delay", 7.0, None)
