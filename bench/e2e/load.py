"""The open-loop load: raw proposals in the agents' formats, published to ``agent.proposals`` on
a fixed schedule, never waiting for answers, each signed by its tenant's principal."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaProducer

from bench.e2e.config import Config
from bench.e2e.names import RunNames
from bench.e2e.proposals import Proposals
from bench.e2e.steps import Step
from bench.e2e.tenancy import principal_of
from shared.identity.signatures import HEADER, SigningKey, sign
from shared.messaging.kafka_security import client_options
from shared.topology import AGENT_PROPOSALS

AMOUNT = "1.00"
TICK_S = 0.005


class Load:
    def __init__(self, config: Config, names: RunNames, proposals: Proposals,
                 bootstrap: str, signing_keys: dict[str, SigningKey] | None) -> None:
        self.config = config
        self.signing_keys = signing_keys
        """Each tenant's principal's key; None: proposals unsigned (``--unsigned``)."""
        self.names = names
        self.proposals = proposals
        self.bootstrap = bootstrap
        self.current: Step | None = None
        """The step being offered right now, if any."""
        self.send_errors: list[str] = []

    async def start(self) -> None:
        self.producer = AIOKafkaProducer(**client_options(self.bootstrap),
                                         acks="all", enable_idempotence=True, linger_ms=1)
        await self.producer.start()

    async def stop(self) -> None:
        await self.producer.stop()

    async def generate(self, step: Step, seconds: float,
                       publish: Callable[[Step], Awaitable[None]] | None = None) -> None:
        """Open loop: proposal k of the step is due at ``k / rate`` seconds; whatever is due is
        sent at once, however far behind the answers are. ``publish`` sends one proposal (by
        default a raw record; ``ClientLoad`` sends through the client)."""
        publish = publish or self._publish
        step.first = len(self.proposals)
        step.started = time.time()
        self.current = step
        began = time.monotonic()
        total = int(round(step.rate * seconds))
        sent = 0
        while sent < total and not step.stop.is_set():
            elapsed = time.monotonic() - began
            due = min(total, int(elapsed * step.rate) + 1)
            if due > sent:
                step.generator_lag_ms.append(max(0.0, (elapsed - sent / step.rate) * 1000))
            while sent < due:
                await publish(step)
                sent += 1
            await asyncio.sleep(max(0.0, min(TICK_S, began + sent / step.rate - time.monotonic())))
        step.ended = time.time()
        step.last = len(self.proposals)
        self.current = None

    async def _publish(self, step: Step) -> None:
        i = len(self.proposals)
        key, value = self._proposal(i)
        self.proposals.published(step.index)
        tenant = self.tenant_of(i)
        headers = [] if self.signing_keys is None else [(HEADER, sign(
            value, self.signing_keys[tenant], principal_id=principal_of(tenant),
            tenant_id=tenant).encode())]
        sent = await self.producer.send(AGENT_PROPOSALS, value, key=key, headers=headers or None)
        sent.add_done_callback(self._sent)

    def _sent(self, future: asyncio.Future) -> None:
        if future.cancelled() or future.exception() is not None:
            self.send_errors.append(repr(future.exception()) if not future.cancelled()
                                    else "cancelled")

    def run_of(self, i: int) -> str:
        """``active_runs`` runs at a time, each getting ``calls_per_run`` calls spread over its
        life (an agent session), then the next generation of runs."""
        runs = self.config.active_runs
        generation, slot = divmod(i, runs)
        return f"{self.names.prefix}-g{generation // self.config.calls_per_run}-r{slot}"

    def tenant_of(self, i: int) -> str:
        """The tenant of proposal ``i``'s run: the run slots are dealt out among the tenants."""
        tenants = self.names.tenants
        return tenants[i % self.config.active_runs % len(tenants)]

    def arguments(self, i: int) -> dict[str, str]:
        """Proposal ``i``'s debit: 1 EUR from its tenant's wallets taken in turn."""
        wallet_ids = self.names.wallets[self.tenant_of(i)]
        turn = i // len(self.names.tenants)
        return {"wallet_id": wallet_ids[turn % len(wallet_ids)], "amount": AMOUNT,
                "currency": "EUR"}

    def _proposal(self, i: int) -> tuple[bytes, bytes]:
        """Proposal ``i`` as its record's key (the run) and value, in the formats taken in turn,
        against the wallets taken in turn."""
        run_id = self.run_of(i)
        call_id = self.names.call_id(i)
        key = self.names.operation_key(i)
        arguments = self.arguments(i)
        fmt = self.config.formats[i % len(self.config.formats)]
        tenant = self.tenant_of(i)
        message: dict[str, Any] = {"run_id": run_id, "principal_id": principal_of(tenant),
                                   "tenant_id": tenant}
        if fmt == "generic":
            message |= {"format": "generic", "tool": "wallet.debit", "call_id": call_id,
                        "arguments": arguments, "operation_key": key}
        elif fmt == "openai.chat":  # as the Chat Completions API returns the assistant message
            message |= {"format": "openai.chat", "operation_keys": {call_id: key}, "message": {
                "role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": "wallet_debit", "arguments": json.dumps(arguments)}}]}}
        elif fmt == "openai.responses":
            message |= {"format": "openai.responses", "operation_keys": {call_id: key},
                        "output": [{"type": "function_call", "id": f"fc_{i}", "call_id": call_id,
                                    "name": "wallet_debit", "status": "completed",
                                    "arguments": json.dumps(arguments)}]}
        else:
            message |= {"format": "anthropic", "operation_keys": {call_id: key}, "message": {
                "role": "assistant", "content": [{"type": "tool_use", "id": call_id,
                                                  "name": "wallet_debit", "input": arguments}]}}
        return run_id.encode(), json.dumps(message).encode()
