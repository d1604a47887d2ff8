-- Runs are named by (tenant, run id) (shared/runs.py): a run id another tenant already uses
-- names a run of one's own, never theirs. Rows written before keep their tenant, which the
-- intake always checked against the run's (a call of another tenant was refused), so every
-- existing call finds its run under the pair.
ALTER TABLE logical_calls DROP CONSTRAINT logical_calls_run_id_fkey;
ALTER TABLE logical_calls DROP CONSTRAINT logical_calls_run_id_provider_call_id_key;
ALTER TABLE runs DROP CONSTRAINT runs_pkey;
ALTER TABLE runs ADD PRIMARY KEY (tenant_id, run_id);
ALTER TABLE logical_calls ADD CONSTRAINT logical_calls_run_fkey
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, run_id);
ALTER TABLE logical_calls ADD CONSTRAINT logical_calls_provider_call_key
    UNIQUE (tenant_id, run_id, provider_call_id);
