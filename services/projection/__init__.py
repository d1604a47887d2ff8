"""The projection: every ledger event kept once in an append-only history, and the run and call
read models derived from it by a pure, order-insensitive reducer, so a replay of the history
rebuilds the same rows (docs/design.md §5 invariants 3 and 11). It also tells agents, on
``agent.results.<tenant>``, when their calls settle."""
