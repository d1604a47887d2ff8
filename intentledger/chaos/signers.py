"""Who signs a protocol's proposals: a principal per proposing identity, with a key made for the
scenario (``shared.identity.local``) and the tenants its honest proposals name.

A proposal ``signed_as`` another principal is signed with that principal's key and tenant; the
impostor is listed too, for the tenants it is ``signed_as`` and nothing more, so the intake
refuses the body it does not own rather than a key it does not know.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from shared.contracts.fault_protocol import FaultProtocol
from shared.identity.local import Identity, LocalIdentities


def scenario_identities(protocol: FaultProtocol, directory: Path) -> LocalIdentities:
    tenants: dict[str, set[str]] = defaultdict(set)
    for proposal in protocol.proposals:
        signer = proposal.signed_as
        principal, tenant = (signer.principal, signer.tenant) if signer else (
            proposal.principal, proposal.tenant)
        tenants[principal].add(tenant)
    identities = LocalIdentities(directory)
    identities.ensure(Identity(principal, tuple(sorted(named))) for principal, named in tenants.items())
    return identities
