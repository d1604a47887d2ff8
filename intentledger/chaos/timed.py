"""What each kind of timed fault does to the running stack once its trigger is reached and its
delay has passed: one function per kind, found by the routing table ``APPLY``. Each says what it
did through ``Scenario.fired`` (the facts are snapshotted then); a fault that could not fire
says nothing, and the runner reports it as never fired.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from intentledger.chaos.approvals import approve
from intentledger.chaos.forgery import forge
from shared.config import Settings
from shared.contracts.fault_protocol import (Approve, Forge, Outage, Redeliver, Replica, Signal,
                                             Tamper, Timed, substitute)
from shared.infra import outages

if TYPE_CHECKING:
    from intentledger.chaos.runner import Scenario


async def apply(scenario: Scenario, fault: Timed) -> None:
    await APPLY[type(fault)](scenario, fault)


async def _signal(scenario: Scenario, fault: Signal) -> None:
    stack = scenario.stack
    replica = stack.replica(fault.service, fault.replica)
    if fault.kind == "kill":
        replica.held_down = True
        stack.send(replica, signal.SIGKILL)
        await scenario.fired(fault.id, f"{replica.label} killed (SIGKILL) for {fault.for_s} s")
        await asyncio.sleep(fault.for_s)
        await stack.launch(replica, scenario.env(replica.service, replica))
        replica.held_down = False
    else:
        stack.send(replica, signal.SIGSTOP)
        await scenario.fired(fault.id, f"{replica.label} paused (SIGSTOP) for {fault.for_s} s")
        await asyncio.sleep(fault.for_s)
        stack.send(replica, signal.SIGCONT)


async def _outage(scenario: Scenario, fault: Outage) -> None:
    settings = Settings()
    stop, start = ((outages.stop_kafka, outages.start_kafka) if fault.target == "kafka"
                   else (outages.stop_postgres, outages.start_postgres))
    record = scenario.records[fault.id]
    record.fired_at_s = scenario.now()  # no snapshot: the target is down
    record.detail = f"{fault.target} stopped for {fault.for_s} s"
    try:
        await asyncio.to_thread(stop, settings)
        await asyncio.sleep(fault.for_s)
    finally:  # also when the scenario is cut short: never leave the target down
        await asyncio.shield(asyncio.to_thread(start, settings))


async def _forge(scenario: Scenario, fault: Forge) -> None:
    answer = await forge(scenario.pool, scenario.positions, fault, scenario.nonce,
                         scenario.deadline)
    if answer is None:
        return  # never fired: the runner reports it
    verdict = f"answered {answer.get('status')} ({answer.get('reason')})"
    if answer.get("status") != "rejected" or not str(answer.get("reason")).startswith(
            "capability_"):
        scenario.report.problems.append(f"forged {fault.tool} request {verdict}: the forgery "
                                        "worked")
    await scenario.fired(fault.id, f"forged {fault.tool} request in the {fault.outbox} outbox "
                                   f"{verdict}")


async def _approve(scenario: Scenario, fault: Approve) -> None:
    logical_call_id = await scenario.answered_call(fault.call, f"fault {fault.id}")
    published = await approve(scenario.endpoints, fault, logical_call_id, scenario.identities,
                              scenario.deadline)
    await scenario.fired(fault.id, f"on {fault.call}: {'; '.join(published)}")


async def _tamper(scenario: Scenario, fault: Tamper) -> None:
    await scenario.answered_call(fault.call, f"fault {fault.id}")
    key = scenario.sent[fault.call].outcome.payload["operation_key"]
    changed = await scenario.pool.execute(substitute(fault.statement, scenario.nonce), key)
    await scenario.fired(fault.id, f"on {fault.call}'s key: {changed}")
    await asyncio.sleep(fault.for_s)


async def _redeliver(scenario: Scenario, fault: Redeliver) -> None:
    records = await scenario.positions.since_start(fault.topic)
    await scenario.positions.republish(records)
    await scenario.fired(fault.id, f"{len(records)} records of {fault.topic} published again")


async def _replica(scenario: Scenario, fault: Replica) -> None:
    replica = await scenario.stack.start(fault.service,
                                         scenario.env(fault.service, armed=False))
    scenario.supervise(replica)
    await scenario.fired(fault.id, f"{replica.label} started")


APPLY: dict[type, Callable[[Scenario, Any], Awaitable[None]]] = {
    Signal: _signal,
    Outage: _outage,
    Forge: _forge,
    Approve: _approve,
    Tamper: _tamper,
    Redeliver: _redeliver,
    Replica: _replica,
}
"""Every kind of ``Timed`` (``tests/unit/chaos/test_timed.py`` holds them equal)."""
