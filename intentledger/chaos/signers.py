"""Who signs a protocol's proposals: a principal per proposing identity, with a key made for the
scenario (``shared.identity.local``) and the tenants its honest proposals name.

A proposal ``signed_as`` another principal is signed with that principal's key and tenant; the
impostor is listed too, for the tenants it is ``signed_as`` and nothing more, so the intake
refuses the body it does not own rather than a key it does not know. The people of ``approve``
faults are listed as approvers of the tenants of the calls they answer (the one a decision
names too, so that a decision naming a colleague is refused for its signer, not for a name
nobody knows), and the dispatcher: it seals the compensations it proposes.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from shared.contracts.fault_protocol import Approve, FaultProtocol
from shared.identity.local import DISPATCHER, Identity, LocalIdentities


def scenario_identities(protocol: FaultProtocol, directory: Path) -> LocalIdentities:
    tenants: dict[str, set[str]] = defaultdict(set)
    for proposal in protocol.proposals:
        signer = proposal.signed_as
        principal, tenant = (signer.principal, signer.tenant) if signer else (
            proposal.principal, proposal.tenant)
        tenants[principal].add(tenant)
    tenant_of = {proposal.name: proposal.tenant for proposal in protocol.proposals}
    people: dict[str, set[str]] = defaultdict(set)
    for fault in protocol.faults:
        if isinstance(fault, Approve):
            for decision in fault.decisions:
                for person in filter(None, (decision.signed_by, decision.approver)):
                    people[person].add(tenant_of[fault.call])
    identities = LocalIdentities(directory)
    identities.ensure([*(Identity(principal, tuple(sorted(named)))
                         for principal, named in tenants.items()),
                       *(Identity(person, tuple(sorted(named)), "person", ("approver",))
                         for person, named in people.items()),
                       DISPATCHER])
    return identities
