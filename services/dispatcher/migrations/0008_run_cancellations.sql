-- Operators' cancellations of runs, as received (the event id is the key: a redelivery is one
-- row), and what became of each: applied by a step of the run under its lease, or refused with
-- a reason. A run records why it stopped as a code too, so that a call refused because its run
-- was cancelled says so (`run_cancelled`) instead of `run_aborted`.
ALTER TABLE runs ADD COLUMN abort_code text;

CREATE TABLE cancellations (
    event_id        uuid PRIMARY KEY,
    tenant_id       text NOT NULL,
    run_id          text NOT NULL,
    request         jsonb NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applied', 'refused')),
    reason          text,
    received_at     timestamptz NOT NULL DEFAULT now(),
    concluded_at    timestamptz
);
CREATE INDEX cancellations_pending ON cancellations (tenant_id, run_id) WHERE status = 'pending';

-- The console's cancel form, like its resolve form, waits for the dispatcher's verdict as the
-- query API's login (k8s/base/postgres/grants.sql makes the same grant after every migration).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'query') THEN
        EXECUTE format('GRANT SELECT (event_id, tenant_id, run_id, status, reason) ON %I.cancellations TO query',
                       current_schema());
    END IF;
END $$;
