-- Runs are named by (tenant, run id) (shared/runs.py), and every event belongs to one
-- tenant's run: two tenants' runs of one id are two rows, and an event never reaches a run
-- of a tenant it does not name.
--
-- Events recorded before without a tenant of their own (a message refused whole: the intake
-- wrote its answer without one) were shown to their run's tenant (query migration 0001), so
-- they take that tenant, in the column and in the envelope the reducer reads back on replay:
-- every run row and its projection hash stay what they were. One whose run is unknown names no
-- run anyone can see: it is moved to events_without_tenant, kept for operators (never
-- deleted: the history is evidence) and out of every tenant's timeline.
UPDATE events e SET tenant_id = r.tenant_id,
                    envelope = jsonb_set(e.envelope, '{payload,tenant_id}', to_jsonb(r.tenant_id))
    FROM runs r
    WHERE e.tenant_id IS NULL AND r.run_id = e.run_id;

CREATE TABLE events_without_tenant (LIKE events);
-- LIKE copies no identity: the positions are the history's, kept as they were.
INSERT INTO events_without_tenant SELECT * FROM events WHERE tenant_id IS NULL;
DELETE FROM events WHERE tenant_id IS NULL;

ALTER TABLE events ALTER COLUMN tenant_id SET NOT NULL;
DROP INDEX events_by_run;
CREATE INDEX events_by_run ON events (tenant_id, run_id, position);

ALTER TABLE runs DROP CONSTRAINT runs_pkey;
ALTER TABLE runs ADD PRIMARY KEY (tenant_id, run_id);
DROP INDEX calls_by_run;
CREATE INDEX calls_by_run ON calls (tenant_id, run_id);
