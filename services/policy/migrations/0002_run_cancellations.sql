-- Runs an operator cancelled (a RunCancellationRequested whose signature proves an operator of
-- the run's tenant): their calls waiting for approval are denied `run_cancelled` at once, and a
-- later call of them that would need approval is denied instead of waiting for people. The
-- dispatcher refuses every call of such a run whatever the policy says; this only spares the
-- agent a wait for an answer nobody will give.
CREATE TABLE cancelled_runs (
    tenant_id       text NOT NULL,
    run_id          text NOT NULL,
    event_id        uuid NOT NULL,
    operator_id     text NOT NULL,
    reason          text NOT NULL,
    cancelled_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, run_id)
);
CREATE INDEX decisions_awaiting_by_run ON decisions (tenant_id, run_id)
    WHERE outcome = 'awaiting_approval';
