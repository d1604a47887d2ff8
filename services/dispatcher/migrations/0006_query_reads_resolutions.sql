-- The console's resolve form (shared/operator/resolve.py, run by the query API as its login
-- `query`) finds the call's run and tenant, then waits for the dispatcher's verdict. Those
-- columns and nothing else; skipped where the deployment has not created the login yet
-- (k8s/base/postgres/grants.sql makes the same grant after every migration).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'query') THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO query', current_schema());
        EXECUTE format('GRANT SELECT (logical_call_id, run_id, tenant_id, state) ON %I.calls TO query',
                       current_schema());
        EXECUTE format('GRANT SELECT (event_id, status, reason) ON %I.resolutions TO query',
                       current_schema());
    END IF;
END $$;
