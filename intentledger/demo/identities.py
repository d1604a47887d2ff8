"""Who acts in the demo, with keys made on the first demo and kept in ``<home>/identity/``
(``shared.identity.local``): the agents sign their proposals, the people their approvals, as
in a deployment; only where the keys come from differs."""

from __future__ import annotations

from shared.config import Settings
from shared.identity.local import Identity, LocalIdentities

PRINCIPALS = (
    Identity("user-42", ("acme",)),
    Identity("agent-7", ("acme",)),
    Identity("intern-3", ("acme",)),
    Identity("finance:ana", ("acme",), "person", ("approver",)),
    Identity("operator:dana", ("*",), "person", ("approver", "operator")),
)


def demo_identities(settings: Settings) -> LocalIdentities:
    identities = LocalIdentities(settings.home / "identity")
    identities.ensure(PRINCIPALS)
    return identities
