-- The highest dispatcher fence seen per run (shared/downstream/fences.py). A request or lookup
-- with a lower fence comes from a worker that lost the run's lease and is answered "stale".
CREATE TABLE fences (
    scope text PRIMARY KEY,
    fence bigint NOT NULL
);
