"""The demo's people: who approves and resolves, and the console that signs for them.

Their keys are the demo home's local identities (``shared.identity.local``, in
``<home>/identity``, beside the agents' the demo proposes with), so approvals and resolutions
are signed and verified as in a deployment: the policy, the dispatcher and the console are
pointed at the same principals file, the console at its own key.
"""

from __future__ import annotations

from shared.config import Settings
from shared.identity.local import Identity, LocalIdentities
from shared.operator.publish import Signer

PEOPLE = (
    Identity("finance:ana", ("acme",), "person", ("approver",)),
    Identity("operator:dana", ("*",), "person", ("operator", "approver")),
    Identity("console", ("*",), "service", ("publishes-for-people",)),
)


def identities(settings: Settings) -> LocalIdentities:
    local = LocalIdentities(settings.home / "identity")
    local.ensure(PEOPLE)
    return local


def verifier_env(settings: Settings) -> dict[str, str]:
    """What the demo's policy, dispatcher and console must be told to verify and sign with."""
    local = identities(settings)
    principals = str(local.principals_file)
    return {"INTENTLEDGER_POLICY_PRINCIPALS_FILE": principals,
            "INTENTLEDGER_DISPATCHER_PRINCIPALS_FILE": principals,
            "INTENTLEDGER_CONSOLE_SIGNING_KEY_FILE": str(local.key_file("console"))}


def signer(settings: Settings, principal_id: str) -> Signer:
    """How ``principal_id`` signs: KeyError for one the demo's identities do not list."""
    return Signer(LocalIdentities(settings.home / "identity").signing_key(principal_id),
                  principal_id)
