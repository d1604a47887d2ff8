-- The query API logs in as `query`: a login role that is neither a superuser, nor BYPASSRLS,
-- nor the owner of the read models, so row-level security holds for it even if a request's
-- `SET LOCAL ROLE` were ever skipped (it can read nothing directly: NOINHERIT, no grants of
-- its own on the projection's tables). The deployment creates the role and its password:
-- CloudNativePG in k8s (postgres-cluster.yaml), `intentledger infra up` locally (trusting
-- loopback), the compose file's init script. Where it does not exist yet this migration skips
-- the grants; k8s/base/postgres/grants.sql makes the same grants after every migration.
--
-- FORCE makes the owner subject to the policies too: a service that owns the tables (the
-- projection) reads and writes through the one policy granted to the NOLOGIN role
-- `intentledger_projection_owner`, of which the tables' owner is made a member. A superuser
-- still bypasses every policy; that is why the query API refuses to start as one
-- (services/query/login.py).

ALTER TABLE projection.runs FORCE ROW LEVEL SECURITY;
ALTER TABLE projection.calls FORCE ROW LEVEL SECURITY;
ALTER TABLE projection.events FORCE ROW LEVEL SECURITY;

DO $$
BEGIN
    CREATE ROLE intentledger_projection_owner NOLOGIN NOSUPERUSER NOBYPASSRLS;
EXCEPTION WHEN duplicate_object THEN NULL;  -- roles are cluster-wide: another database made it
END $$;
CREATE POLICY projection_owner_rows ON projection.runs FOR ALL TO intentledger_projection_owner
    USING (true) WITH CHECK (true);
CREATE POLICY projection_owner_rows ON projection.calls FOR ALL TO intentledger_projection_owner
    USING (true) WITH CHECK (true);
CREATE POLICY projection_owner_rows ON projection.events FOR ALL TO intentledger_projection_owner
    USING (true) WITH CHECK (true);

DO $$
DECLARE
    owner_name name := (SELECT pg_get_userbyid(relowner) FROM pg_class
                        WHERE oid = 'projection.runs'::regclass);
BEGIN
    EXECUTE format('GRANT intentledger_projection_owner TO %I', owner_name);
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'query') THEN
        RETURN;
    END IF;
    -- Membership only lets it SET ROLE; NOINHERIT keeps the operator's rows out of reach of a
    -- connection that has not switched.
    ALTER ROLE query NOINHERIT;
    GRANT intentledger_query_tenant, intentledger_query_operator TO query;
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO query', current_database());
    -- Readiness checks both schemas' migrations (shared/db/schemas.py expect_migrated).
    GRANT USAGE ON SCHEMA projection, query TO query;
    GRANT SELECT ON projection.schema_migrations, query.schema_migrations TO query;
END $$;
