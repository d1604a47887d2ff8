"""Who the stack of a fault protocol knows: the honest signers for the tenants they name; an
impostor only for the tenant it really signs for; the people of ``approve`` faults as
approvers of their calls' tenants; the dispatcher, which seals compensations."""

from pathlib import Path

from intentledger.chaos.signers import scenario_identities
from shared.contracts.fault_protocol import FaultProtocol
from shared.identity.principals import load_principals

PROPOSAL = {"tool": "wallet.debit", "arguments": {}}


def known(protocol: dict, folder: Path) -> dict:
    identities = scenario_identities(FaultProtocol.model_validate(protocol), folder)
    return {p.id: (p.kind, p.tenants, p.roles)
            for p in load_principals(identities.principals_file).principals}


def test_an_impostor_is_known_for_its_own_tenant_only(tmp_path: Path):
    principals = known({
        "name": "p", "guards": "g", "seed": 1, "proposals": [
            PROPOSAL | {"name": "honest"},
            PROPOSAL | {"name": "other-tenant", "tenant": "globex"},
            PROPOSAL | {"name": "impostor", "principal": "agent-7",
                        "signed_as": {"principal": "globex-agent", "tenant": "globex"}}],
        "assertions": [{"fact": "business_effects", "call": "honest", "value": 1}]}, tmp_path)
    assert principals == {"agent-7": ("agent", ("acme", "globex"), ()),
                          "globex-agent": ("agent", ("globex",), ()),
                          "dispatcher": ("service", ("*",), ("compensator",))}


def test_approvers_are_people_of_the_tenant_of_the_call_they_answer(tmp_path: Path):
    """The colleague a decision names is listed too: a grant signed by finance:a naming
    finance:b must be refused for who signed it, not for naming someone unknown."""
    principals = known({
        "name": "p", "guards": "g", "seed": 1,
        "proposals": [PROPOSAL | {"name": "big"}],
        "faults": [{"kind": "approve", "id": "a", "call": "big", "decisions": [
            {"signed_by": "finance:a", "approver": "finance:b"}]}],
        "assertions": [{"fact": "business_effects", "call": "big", "value": 0}]}, tmp_path)
    for person in ("finance:a", "finance:b"):
        assert principals[person] == ("person", ("acme",), ("approver",))
