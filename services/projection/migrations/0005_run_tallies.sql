-- What the projector keeps beside each run so that an event moves the run without reading the
-- run's other calls (services/projection/tally.py): its totals and the digest of its call rows,
-- from which its projection hash is computed (reducer projection.v2). A run stored before has
-- none: its next event derives it from all its rows, and gives it one. Its hash, computed by
-- projection.v1, stays verifiable until then (hashing.RUN_HASHES).
ALTER TABLE runs ADD COLUMN tally jsonb;
