-- The person a gateway proposed a run's first call for (docs/mcp.md): the run is that
-- principal's *and* that person's, so another person behind the same agent cannot propose into
-- it, spend its budgets, or put a call in it whose failure could start the run's compensations
-- (services/proposal_intake/run_checks.py). `person_recorded` tells "for no person" (NULL,
-- recorded) from a run created before this migration, which stays its principal's alone.
ALTER TABLE runs ADD COLUMN person_id text,
    ADD COLUMN person_recorded boolean NOT NULL DEFAULT false;
