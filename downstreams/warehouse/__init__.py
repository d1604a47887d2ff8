"""The second reference downstream (docs/design.md §7): a warehouse that reserves and releases stock
and schedules shipments over the Kafka effect adapter, for the saga fault suite."""
