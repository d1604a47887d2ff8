"""How one run names what it creates (runs, call ids, operation keys, wallets) under a prefix of
its own, so that every query of the shared ledger finds exactly this run's records and an answer
on its tenants' ``agent.results.<tenant>`` leads back to the proposal it answers."""

from __future__ import annotations

import secrets
import time

TENANT = "bench"
"""The benchmark's own tenant (and its principal's, in ``bench/policy.yaml``): a run on a shared
database must not spend a real tenant's rate and velocity budgets. The demo's ``acme`` has an
hourly velocity limit that one benchmark run used to exhaust, for an hour."""
PRINCIPAL = "agent-7"


class RunNames:
    def __init__(self, wallets: int, tenants: list[str] | None = None) -> None:
        self.nonce = f"{time.strftime('%m%d%H%M')}{secrets.token_hex(2)}"
        self.prefix = f"bench-{self.nonce}"
        self.tenants = tenants or [TENANT]
        """The run's tenants (``bench/e2e/tenancy.py``); its runs are dealt out among them."""
        share = max(1, wallets // len(self.tenants))
        self.wallets = {tenant: [f"tenant/{tenant}/{self.prefix}-w{j}" for j in range(share)]
                        for tenant in self.tenants}
        """Each tenant's wallets (``wallets`` shared out): only its own principal may debit them."""

    @property
    def wallet_ids(self) -> list[str]:
        """Every tenant's wallets."""
        return [wallet for wallets in self.wallets.values() for wallet in wallets]

    @property
    def runs_like(self) -> str:
        """A LIKE pattern for this run's run ids (and the partition keys of its events)."""
        return self.prefix + "-%"

    @property
    def wallets_like(self) -> str:
        """A LIKE pattern for this run's wallet ids."""
        escaped = self.prefix.replace("_", r"\_")
        return f"tenant/%/{escaped}-%"

    def call_id(self, i: int) -> str:
        return f"call_{self.nonce}_{i}"

    def operation_key(self, i: int) -> str:
        return f"{self.prefix}-op-{i}"


def proposal_index(call_id: str) -> int | None:
    """The index of the proposal a call id of ``RunNames.call_id`` was made for."""
    try:
        return int(call_id.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return None
