"""The pipeline under test as the harness sees it: its services and how each is configured, the
consumer groups and outboxes where work waits, and the states a call goes through. Every other
module asks here rather than keeping its own list."""

from __future__ import annotations

from pathlib import Path

from shared.identity.local import LocalIdentities
from shared.topology import CONSUMER_GROUPS, consumed_by

ROOT = Path(__file__).resolve().parents[2]
POLICY_FILE = ROOT / "bench" / "policy.yaml"
TOOLS_FILE = ROOT / "config" / "tools.example.yaml"

SERVICES = ("relay", "proposal-intake", "policy", "dispatcher", "projection", "wallet")
GROUP_TOPICS = {group: consumed_by(group) for service in SERVICES
                for group in CONSUMER_GROUPS.get(service, ())}
"""Every consumer group the pipeline has, with the topics it applies."""
OUTBOX_SCHEMAS = ("proposal_intake", "policy", "dispatcher", "wallet", "projection")
MOVING = ("AUTHORIZED", "INTENT_RECORDED", "DISPATCHING", "UNKNOWN", "RECONCILING",
          "COMPENSATING")
EXPECTED_DEBITS = {"SUCCEEDED": 1, "COMPENSATED": 1, "COMPENSATION_FAILED": 1, "FAILED": 0,
                   "DENIED": 0, "EXPIRED": 0}
"""Wallet debits a debit call may have in each terminal state (a compensated one keeps its debit
and has one refund)."""
TERMINAL = frozenset(EXPECTED_DEBITS)


def service_env(service: str, overrides: dict[str, dict[str, str]],
                identities: LocalIdentities | None = None,
                policy: Path = POLICY_FILE) -> dict[str, str]:
    """The environment of one service's processes: the benchmark's policy (``policy``: the
    one written for the run's tenants), tool registry and identities (who signs its
    proposals, and the dispatcher's key for compensations), then the ``--env`` settings given
    for that service."""
    env: dict[str, str] = {}
    principals = ({"PRINCIPALS_FILE": str(identities.principals_file)} if identities else {})
    if service == "proposal-intake":
        env |= {"INTENTLEDGER_INTAKE_TOOLS_FILE": str(TOOLS_FILE),
                **{f"INTENTLEDGER_INTAKE_{name}": value for name, value in principals.items()},
                # budgets are not what this measures: no run runs out of calls or attempts,
                # and no tenant or principal that offers the load is ever refused its rate
                # (whose buckets are still spent: their statements are part of the cost)
                "INTENTLEDGER_INTAKE_DEFAULT_MAX_CALLS": "100000",
                "INTENTLEDGER_INTAKE_DEFAULT_MAX_ATTEMPTS": "1000000",
                **{f"INTENTLEDGER_INTAKE_{who}_CALLS_{what}": "1000000000"
                   for who in ("TENANT", "PRINCIPAL") for what in ("PER_SECOND", "BURST")}}
    if service == "policy":
        env |= {"INTENTLEDGER_POLICY_POLICY_FILE": str(policy),
                "INTENTLEDGER_INTAKE_TOOLS_FILE": str(TOOLS_FILE),
                **{f"INTENTLEDGER_POLICY_{name}": value for name, value in principals.items()}}
    if service == "dispatcher":
        env |= {"INTENTLEDGER_DISPATCHER_POLICY_FILE": str(policy),
                "INTENTLEDGER_DISPATCHER_TOOLS_FILE": str(TOOLS_FILE),
                **{f"INTENTLEDGER_DISPATCHER_{name}": value for name, value in principals.items()},
                **(identities.dispatcher_env() if identities else {})}
    return env | overrides.get(service, {})
