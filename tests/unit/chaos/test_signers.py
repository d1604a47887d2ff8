"""Who the stack of a fault protocol knows: the honest signers for the tenants they name; an
impostor only for the tenant it really signs for."""

from pathlib import Path

from intentledger.chaos.signers import scenario_identities
from shared.contracts.fault_protocol import FaultProtocol
from shared.identity.principals import load_principals

PROPOSAL = {"tool": "wallet.debit", "arguments": {}}


def test_an_impostor_is_known_for_its_own_tenant_only(tmp_path: Path):
    protocol = FaultProtocol.model_validate({
        "name": "p", "guards": "g", "seed": 1, "proposals": [
            PROPOSAL | {"name": "honest"},
            PROPOSAL | {"name": "other-tenant", "tenant": "globex"},
            PROPOSAL | {"name": "impostor", "principal": "agent-7",
                        "signed_as": {"principal": "globex-agent", "tenant": "globex"}}],
        "assertions": [{"fact": "business_effects", "call": "honest", "value": 1}]})
    principals = load_principals(scenario_identities(protocol, tmp_path).principals_file)
    assert {p.id: p.tenants for p in principals.principals} == {
        "agent-7": ("acme", "globex"), "globex-agent": ("globex",)}
