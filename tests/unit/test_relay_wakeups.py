"""A notification names the outbox that has a new row: the relay queues that outbox at once,
without scanning every outbox, and asks for a scan only for one it does not know."""

import asyncio

from services.relay.relay import Relay
from services.relay.settings import RelaySettings


def relay(*schemas: str, workers: int = 2) -> Relay:
    return Relay(pool=None, producers=None, settings=RelaySettings(schemas=list(schemas),
                                                                   workers=workers))


def queued(relay: Relay) -> list[str]:
    items = []
    while not relay._work.empty():
        items.append(relay._work.get_nowait())
    return items


def test_a_notified_outbox_is_queued_once_however_often_it_is_notified():
    r = relay("policy", "wallet")
    assert r.notified("wallet") and r.notified("wallet") and r.notified("policy")
    assert queued(r) == ["wallet", "policy"]


def test_an_outbox_it_does_not_drain_is_not_queued_and_the_caller_is_told():
    r = relay("policy")
    assert not r.notified("elsewhere")
    assert queued(r) == []


async def test_an_outbox_notified_while_a_worker_publishes_it_is_looked_at_again():
    """The worker's last claim may have run before the new row committed: it must not let the
    outbox go until it has claimed once more."""
    r = relay("policy", workers=1)
    claims = []

    async def relay_batch(schema, on_full=lambda: None):
        claims.append(schema)
        if len(claims) == 1:
            assert r.notified("policy")  # arrives while the first claim is in flight
        return 0

    r.relay_batch = relay_batch
    assert r.notified("policy")
    stopping = asyncio.Event()
    worker = asyncio.create_task(r.worker(stopping))
    for _ in range(50):
        await asyncio.sleep(0.01)
        if len(claims) >= 2:
            break
    stopping.set()
    await worker
    assert claims[:2] == ["policy", "policy"]
