"""A topic's creation waits for the broker to name a controller: for a moment after it starts or
resumes a broker names none, and aiokafka then fails with an ``AttributeError`` that every
caller would take for a bug (a CI run lost a test to it once). A broker that never names one
ends the wait with an error that callers retry."""

import pytest
from aiokafka.errors import NotControllerError

from shared.errors import is_retryable
from shared.messaging.admin import controller_known

BROKERS = [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}]


class _Broker:
    """What ``describe_cluster`` answers, one answer per call, the last one for ever after."""

    def __init__(self, *controllers: int) -> None:
        self.controllers = list(controllers)
        self.asked = 0

    async def describe_cluster(self) -> dict:
        self.asked += 1
        controller = self.controllers.pop(0) if len(self.controllers) > 1 else self.controllers[0]
        return {"brokers": BROKERS, "controller_id": controller, "cluster_id": "c"}


async def test_the_creation_waits_until_the_broker_names_a_controller():
    broker = _Broker(-1, -1, 1)
    await controller_known(broker, patience_s=5)  # type: ignore[arg-type]
    assert broker.asked == 3


async def test_a_controller_that_is_not_among_the_brokers_is_none():
    broker = _Broker(7, 1)
    await controller_known(broker, patience_s=5)  # type: ignore[arg-type]
    assert broker.asked == 2


async def test_a_broker_that_names_none_ends_the_wait_with_a_retryable_error():
    broker = _Broker(-1)
    with pytest.raises(NotControllerError) as raised:
        await controller_known(broker, patience_s=0.3)  # type: ignore[arg-type]
    assert is_retryable(raised.value)
    assert broker.asked >= 2
