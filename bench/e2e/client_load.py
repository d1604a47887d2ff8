"""Proposals sent the way an agent built on the thin client sends them: ``Client.call`` on the
load's open-loop schedule, one task per call, each timed from just before the call to the
settled outcome it returned. That is the latency an agent sees (signing, the produce, the
client's own partition readers and routing), measured beside the bench reader's for the same
proposals. Each tenant's calls go through a client of its own, as each tenant's agents would.
The calls are ordinary proposals of the run (its names, runs and wallets), so the end-of-run
checks count them exactly like the raw ones."""

from __future__ import annotations

import asyncio
import time

from bench.e2e.load import Load
from bench.e2e.steps import Step
from bench.e2e.tenancy import principal_of
from intentledger_client import Client
from shared.identity.signatures import SigningKey
from shared.messaging.kafka_security import client_options

WAIT_S = 60.0
"""How long each call waits for its settled outcome; past it the call returns ``pending``."""


class ClientLoad:
    def __init__(self, load: Load, bootstrap: str,
                 signing_keys: dict[str, SigningKey] | None) -> None:
        self.load = load
        self.proposals = load.proposals
        self.clients = {tenant: self._client(bootstrap, tenant, signing_keys)
                        for tenant in load.names.tenants}
        self.calls: set[asyncio.Task[None]] = set()

    @staticmethod
    def _client(bootstrap: str, tenant: str,
                signing_keys: dict[str, SigningKey] | None) -> Client:
        options = client_options(bootstrap)
        return Client(options.pop("bootstrap_servers"), principal_id=principal_of(tenant),
                      tenant_id=tenant, signing_key=None if signing_keys is None else signing_keys[tenant],
                      kafka_options=options)

    async def start(self) -> None:
        await asyncio.gather(*(client.start() for client in self.clients.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(client.close() for client in self.clients.values()))

    async def generate(self, step: Step, seconds: float) -> None:
        """The step's calls on the load's schedule; returns once every call has returned."""
        await self.load.generate(step, seconds, publish=self._call_soon)
        await asyncio.gather(*self.calls)

    async def _call_soon(self, step: Step) -> None:
        i = len(self.proposals)
        self.proposals.published(step.index)
        task = asyncio.create_task(self._call(i))
        self.calls.add(task)
        task.add_done_callback(self.calls.discard)

    async def _call(self, i: int) -> None:
        names = self.load.names
        client = self.clients[self.load.tenant_of(i)]
        try:
            outcome = await client.call(self.load.run_of(i), "wallet.debit",
                                        self.load.arguments(i), call_id=names.call_id(i),
                                        operation_key=names.operation_key(i), wait=WAIT_S)
        except Exception as error:  # counted with the load's send errors: it fails the run
            self.load.send_errors.append(f"client call {i}: {error!r}")
            return
        self.proposals.t_returned[i] = time.time()
        self.proposals.client_status[i] = outcome.status
