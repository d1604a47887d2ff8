"""The relay: the only process that publishes to Kafka (docs/design.md §2).

It drains every service's outbox table and publishes each row at least once, keeping
per-partition-key order; consumers deduplicate by event id.
"""
