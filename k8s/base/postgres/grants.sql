-- Who may do what in the intentledger database. Run by the migration Job (migrate-job.yaml) as
-- the migration role `intentledger` right after `intentledger migrate`; idempotent, so every
-- migration run ends with it. CloudNativePG (postgres-cluster.yaml) creates the login roles and
-- makes `intentledger` a member of every service role; this file decides ownership and grants.
--
-- Migrations create objects as `intentledger`; here each service role is made the owner of its
-- schema and of every table in it (so a service can re-check its migrations at start and use
-- its tables, and nothing else). Roles that do not exist are skipped: the reference downstreams
-- (wallet, warehouse) have roles only where the overlay deploys them.
DO $grants$
DECLARE
    owners CONSTANT text[] := ARRAY[
        -- schema          owning login role
        'proposal_intake', 'proposal_intake',
        'policy',          'policy',
        'dispatcher',      'dispatcher',
        'projection',      'projection',
        -- the query API owns nothing: its schema (RLS, dead letters) goes with the projection's
        'query',           'projection',
        'wallet',          'wallet',
        'warehouse',       'warehouse'];
    i integer;
    schema_name text;
    role_name text;
    relation record;
BEGIN
    FOR i IN 1 .. array_length(owners, 1) BY 2 LOOP
        schema_name := owners[i];
        role_name := owners[i + 1];
        CONTINUE WHEN NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name);
        -- A service re-runs its own migrations at start (shared/db/schemas.py), and
        -- CREATE SCHEMA IF NOT EXISTS checks this privilege even when the schema exists.
        EXECUTE format('GRANT CONNECT, CREATE ON DATABASE %I TO %I', current_database(), role_name);
        CONTINUE WHEN to_regnamespace(quote_ident(schema_name)) IS NULL;
        EXECUTE format('ALTER SCHEMA %I OWNER TO %I', schema_name, role_name);
        FOR relation IN
            SELECT c.oid::regclass AS name, c.relkind
            FROM pg_class c
            WHERE c.relnamespace = to_regnamespace(quote_ident(schema_name))
              AND c.relkind IN ('r', 'p', 'v', 'm')
              AND c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = role_name)
        LOOP
            -- Sequences of serial and identity columns follow their table.
            EXECUTE format('ALTER %s %s OWNER TO %I',
                           CASE relation.relkind WHEN 'v' THEN 'VIEW'
                                                 WHEN 'm' THEN 'MATERIALIZED VIEW'
                                                 ELSE 'TABLE' END,
                           relation.name, role_name);
        END LOOP;
        -- The relay publishes every outbox: it may read, mark and purge outbox rows, and read
        -- which migrations are applied (its readiness: the outbox it drains is migrated).
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'relay')
           AND to_regclass(format('%I.outbox', schema_name)) IS NOT NULL THEN
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO relay', schema_name);
            EXECUTE format('GRANT SELECT, UPDATE, DELETE ON %I.outbox TO relay', schema_name);
            EXECUTE format('GRANT SELECT ON %I.schema_migrations TO relay', schema_name);
        END IF;
        -- The projection samples every outbox's backlog for the console's health charts
        -- (services/projection/health_sampler.py): it counts pending rows, nothing more.
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'projection')
           AND to_regclass(format('%I.outbox', schema_name)) IS NOT NULL THEN
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO projection', schema_name);
            EXECUTE format('GRANT SELECT ON %I.outbox TO projection', schema_name);
        END IF;
    END LOOP;

    -- The query API applies no migration (services/query/main.py) and owns no table, so
    -- row-level security binds it (FORCEd, services/query/migrations/0003_query_login.sql):
    -- it checks both schemas' migrations at start and reads only as one of the two NOLOGIN
    -- roles of services/query/migrations/0001_query.sql (SET LOCAL ROLE per request). NOINHERIT:
    -- a connection that has not switched role reads nothing.
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'query')
       AND to_regclass('query.schema_migrations') IS NOT NULL THEN
        ALTER ROLE query NOINHERIT;
        EXECUTE format('GRANT CONNECT ON DATABASE %I TO query', current_database());
        GRANT USAGE ON SCHEMA projection, query TO query;
        GRANT SELECT ON projection.schema_migrations, query.schema_migrations TO query;
        GRANT intentledger_query_tenant, intentledger_query_operator TO query;
    END IF;
    -- FORCE binds the tables' owner too: the projection reads and writes them through the
    -- policy granted to this role.
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'projection')
       AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'intentledger_projection_owner') THEN
        GRANT intentledger_projection_owner TO projection;
    END IF;
    -- The console's resolve form (services/query/console/web.py) finds the call's run and then
    -- waits for the dispatcher's verdict on the resolution, as `intentledger resolve` does.
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'query')
       AND to_regclass('dispatcher.resolutions') IS NOT NULL THEN
        GRANT USAGE ON SCHEMA dispatcher TO query;
        GRANT SELECT (logical_call_id, run_id, tenant_id, state) ON dispatcher.calls TO query;
        GRANT SELECT (event_id, status, reason) ON dispatcher.resolutions TO query;
    END IF;
    -- Its cancel form waits for the dispatcher's verdict on a run's cancellation likewise.
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'query')
       AND to_regclass('dispatcher.cancellations') IS NOT NULL THEN
        GRANT SELECT (event_id, tenant_id, run_id, status, reason) ON dispatcher.cancellations
            TO query;
    END IF;
END
$grants$;
