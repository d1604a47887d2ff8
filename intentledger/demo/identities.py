"""Who acts in the demo: the agents that propose, the people who approve and resolve, the
console that signs for the people signed in to it, and the dispatcher that proposes
compensations.

Their keys are made on the first demo and kept in ``<home>/identity/`` (``shared.identity.local``),
so proposals, approvals and resolutions are signed and verified as in a deployment; only where
the keys come from differs. Every service the demo starts is pointed at the one principals file.
"""

from __future__ import annotations

from shared.config import Settings
from shared.identity.local import DISPATCHER, Identity, LocalIdentities
from shared.operator.publish import Signer

OPERATOR_ID = "operator:demo"
"""The person signed in to the demo's console (the example policy's resolution rules let
``operator:*`` settle acme's calls by hand)."""
PRINCIPALS = (
    Identity("user-42", ("acme",)),
    Identity("agent-7", ("acme",)),
    Identity("intern-3", ("acme",)),
    Identity("finance:ana", ("acme",), "person", ("approver",)),
    Identity("operator:dana", ("*",), "person", ("operator", "approver")),
    Identity(OPERATOR_ID, ("*",), "person", ("operator",)),
    Identity("console", ("*",), "service", ("publishes-for-people",)),
    DISPATCHER,
)


def demo_identities(settings: Settings) -> LocalIdentities:
    identities = LocalIdentities(settings.home / "identity")
    identities.ensure(PRINCIPALS)
    return identities


def service_env(identities: LocalIdentities) -> dict[str, str]:
    """What the demo's intake, policy and dispatcher verify with, and the console and the
    dispatcher sign with."""
    principals = str(identities.principals_file)
    return {"INTENTLEDGER_INTAKE_PRINCIPALS_FILE": principals,
            "INTENTLEDGER_POLICY_PRINCIPALS_FILE": principals,
            "INTENTLEDGER_DISPATCHER_PRINCIPALS_FILE": principals,
            "INTENTLEDGER_CONSOLE_SIGNING_KEY_FILE": str(identities.key_file("console")),
            **identities.dispatcher_env()}


def signer(identities: LocalIdentities, principal_id: str) -> Signer:
    """How ``principal_id`` signs an approval or a resolution of its own."""
    return Signer(identities.signing_key(principal_id), principal_id)
