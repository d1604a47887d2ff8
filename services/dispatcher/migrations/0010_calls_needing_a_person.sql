-- The backlog gauges (repository.unresolved, repository.awaiting_review), sampled every 5 s by
-- every replica, counted the calls in these states by reading every call there ever was: on a
-- ledger of a million settled calls, 0.7 s of PostgreSQL each, about a fifth of a core in all.
-- Only the few calls in these states are in this index.
CREATE INDEX calls_needing_a_person ON calls (state)
    WHERE state IN ('UNKNOWN', 'RECONCILING', 'MANUAL_REVIEW');
