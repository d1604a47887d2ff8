"""The backbone demo: one event round-tripped through outbox, relay, Kafka and a consumer.

Later issues grow it into the crash-after-debit story; today it shows the mechanism every
guarantee rests on, including what happens when the relay publishes the same row twice.
"""

from intentledger.demo.main import run_demo

__all__ = ["run_demo"]
