"""What the projection consumes: every ledger topic, and which reader turns each event into
the facts it contributes (``facts.py``). The live consumer and a replay read through the same
table, so the two can never disagree on what an event means."""

from __future__ import annotations

from services.projection.facts import (Delivery, Fact, accepted, committed, decision, dispatched,
                                       outcome)
from shared.contracts.authorizations import (APPROVAL_REQUESTED, AUTHORIZATION_ALLOWED,
                                             AUTHORIZATION_DENIED)
from shared.contracts.dispatch import DISPATCH_EVENTS
from shared.contracts.effects import EFFECT_COMMITTED
from shared.contracts.intake import DUPLICATE_PROPOSAL, PROPOSAL_ACCEPTED, PROPOSAL_REJECTED
from shared.errors import PermanentError
from shared.messaging.routes import Router, Routes
from shared.topology import LEDGER_AUTHORIZATIONS, LEDGER_DISPATCH, LEDGER_EFFECTS, LEDGER_INTAKE

ROUTES: Routes = {
    LEDGER_INTAKE: {PROPOSAL_ACCEPTED: accepted, DUPLICATE_PROPOSAL: outcome,
                    PROPOSAL_REJECTED: outcome},
    LEDGER_AUTHORIZATIONS: {AUTHORIZATION_ALLOWED: decision, AUTHORIZATION_DENIED: decision,
                            APPROVAL_REQUESTED: decision},
    LEDGER_DISPATCH: dict.fromkeys(DISPATCH_EVENTS, dispatched),
    LEDGER_EFFECTS: {EFFECT_COMMITTED: committed},
}
_READERS = Router(ROUTES)


def read(delivery: Delivery) -> Fact:
    """Raises ``PermanentError`` (the record is dead-lettered with the reason) for a payload its
    event type does not allow, and for an event type this projection does not know: refused
    rather than silently skipped, so that it can be replayed once the projection knows it."""
    try:
        reader = _READERS.target(delivery.event_type)
    except KeyError:
        raise PermanentError(f"{delivery.event_type}: not a ledger event type this projection "
                             "knows") from None
    return reader(delivery)
