-- Runs are named by (tenant, run id) (shared/runs.py): two tenants' runs of one id are two
-- runs, each with its own lease, fence, attempt budget and saga. Existing calls and runs
-- already agree on their tenant (the intake never let a call into another tenant's run), so
-- the leases and stale writes take the tenant of their run.
ALTER TABLE leases ADD COLUMN tenant_id text;
UPDATE leases l SET tenant_id = r.tenant_id FROM runs r WHERE r.run_id = l.run_id;
ALTER TABLE leases ALTER COLUMN tenant_id SET NOT NULL;

-- Evidence, so never deleted: a row whose run is gone (none should be) keeps a NULL tenant.
ALTER TABLE stale_writes ADD COLUMN tenant_id text;
UPDATE stale_writes s SET tenant_id = r.tenant_id FROM runs r WHERE r.run_id = s.run_id;

ALTER TABLE leases DROP CONSTRAINT leases_run_id_fkey;
ALTER TABLE calls DROP CONSTRAINT calls_run_id_fkey;
ALTER TABLE leases DROP CONSTRAINT leases_pkey;
ALTER TABLE runs DROP CONSTRAINT runs_pkey;
ALTER TABLE runs ADD PRIMARY KEY (tenant_id, run_id);
ALTER TABLE leases ADD PRIMARY KEY (tenant_id, run_id);
ALTER TABLE leases ADD CONSTRAINT leases_run_fkey
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, run_id);
ALTER TABLE calls ADD CONSTRAINT calls_run_fkey
    FOREIGN KEY (tenant_id, run_id) REFERENCES runs (tenant_id, run_id);
DROP INDEX calls_by_run;
CREATE INDEX calls_by_run ON calls (tenant_id, run_id);
