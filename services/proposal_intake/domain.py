"""Pure rules of the intake: from a proposal to a named intent, or to the reason it is refused.

Validation order (docs/design.md §4): size limits and schema happened before (``limits``,
``formats``); here come known tool and version, canonical arguments, tenant and resource
binding (inside canonicalization), the operation key; run state and budgets follow in the
handler because they need the database.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from shared.contracts.proposals import ToolCallProposal
from shared.contracts.intake import Intent
from shared.identity.delegation import Proposer
from shared.ids import new_event_id
from shared.tools import CanonicalArguments, ToolRegistry, ToolSpec, canonicalize, operation_key


@dataclass(frozen=True)
class Named:
    tool: ToolSpec
    canonical: CanonicalArguments
    operation_key: str


def name_intent(proposal: ToolCallProposal, registry: ToolRegistry) -> Named:
    """Raises ``shared.tools.Rejection`` with a stable code when the proposal cannot be named."""
    tool = registry.resolve(proposal.tool_name, proposal.tool_version)
    canonical = canonicalize(tool, proposal.tenant_id, proposal.arguments)
    key = operation_key(tool, proposal.tenant_id, proposal.run_id, canonical,
                        proposal.caller_operation_key)
    return Named(tool, canonical, key)


def intent_of(proposal: ToolCallProposal, named: Named, deadline_at: datetime,
              max_attempts: int, proposer: Proposer | None = None) -> Intent:
    """``proposer``: who signed for the proposal's principal (a gateway), recorded with it."""
    return Intent(
        run_id=proposal.run_id,
        provider=proposal.provider,
        provider_call_id=proposal.provider_call_id,
        logical_call_id=new_logical_call_id(),
        operation_key=named.operation_key,
        tool_name=named.tool.name,
        tool_version=named.tool.version,
        arguments_hash=named.canonical.hash,
        canonical_arguments=named.canonical.value,
        principal_id=proposal.principal_id,
        tenant_id=proposal.tenant_id,
        deadline_at=deadline_at,
        run_max_attempts=max_attempts,
        signed_by=proposer.signed_by if proposer else None,
        person_id=proposer.person_id if proposer else None,
    )


def proposed_by(row, principal_id: str, person_id: str | None) -> bool:
    """Whether a recorded intent or run (``row``, with its ``principal_id``, ``person_id`` and
    ``person_recorded`` columns) is ``principal_id``'s, for ``person_id``, the person a gateway
    proposed it for (None: for no person). One recorded before the intake kept persons
    (migrations 0007 and 0008) is its principal's alone, as it was when it was written."""
    return row["principal_id"] == principal_id and (
        not row["person_recorded"] or row["person_id"] == person_id)


def new_logical_call_id() -> uuid.UUID:
    """Time-ordered like event ids, so calls list in the order they were proposed."""
    return new_event_id()
