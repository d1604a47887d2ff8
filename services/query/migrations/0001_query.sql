-- Tenant isolation of the query API, enforced by PostgreSQL rather than by the API's WHERE
-- clauses. The API connects as the services' login role (the projection tables' owner, a
-- superuser locally: both bypass row-level security), so every request's transaction first
-- runs `SET LOCAL ROLE` to one of two NOLOGIN roles without BYPASSRLS:
--   intentledger_query_tenant    sees the rows whose tenant_id equals the transaction-local
--                                setting `intentledger.tenant`; unset or empty: no rows;
--   intentledger_query_operator  sees every tenant's rows and may read dead letters.
-- The owner keeps bypassing RLS (no FORCE), so the projection service's writes are unaffected.
-- Runs after the projection migration (services/registry.py orders SCHEMAS).

DO $$
BEGIN
    CREATE ROLE intentledger_query_tenant NOLOGIN NOSUPERUSER NOINHERIT NOBYPASSRLS;
EXCEPTION WHEN duplicate_object THEN NULL;  -- roles are cluster-wide: another database made it
END $$;
DO $$
BEGIN
    CREATE ROLE intentledger_query_operator NOLOGIN NOSUPERUSER NOINHERIT NOBYPASSRLS;
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
-- The login role that runs migrations is the one the API connects as: it may switch to both.
GRANT intentledger_query_tenant, intentledger_query_operator TO CURRENT_USER;

GRANT USAGE ON SCHEMA projection TO intentledger_query_tenant, intentledger_query_operator;
GRANT SELECT ON projection.runs, projection.calls, projection.events
    TO intentledger_query_tenant, intentledger_query_operator;

ALTER TABLE projection.runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE projection.calls ENABLE ROW LEVEL SECURITY;
ALTER TABLE projection.events ENABLE ROW LEVEL SECURITY;

CREATE POLICY query_tenant_rows ON projection.runs FOR SELECT TO intentledger_query_tenant
    USING (tenant_id = current_setting('intentledger.tenant', true));
CREATE POLICY query_tenant_rows ON projection.calls FOR SELECT TO intentledger_query_tenant
    USING (tenant_id = current_setting('intentledger.tenant', true));
-- An event without a tenant of its own belongs to its run's tenant.
CREATE POLICY query_tenant_rows ON projection.events FOR SELECT TO intentledger_query_tenant
    USING (tenant_id = current_setting('intentledger.tenant', true)
           OR (tenant_id IS NULL AND EXISTS (
               SELECT 1 FROM projection.runs r
               WHERE r.run_id = events.run_id
                 AND r.tenant_id = current_setting('intentledger.tenant', true))));

CREATE POLICY query_operator_rows ON projection.runs FOR SELECT TO intentledger_query_operator
    USING (true);
CREATE POLICY query_operator_rows ON projection.calls FOR SELECT TO intentledger_query_operator
    USING (true);
CREATE POLICY query_operator_rows ON projection.events FOR SELECT TO intentledger_query_operator
    USING (true);

-- Dead letters are operator-only: an undecodable record has no tenant to scope it by. Every
-- schema with a `dead_letters` table (the messaging migrations give each service one) is
-- found at call time, so a service added later is listed without a new migration. Keyset
-- order: (created_at, schema_name, id). Schemas that have not applied messaging/0002 yet
-- answer replayed_at NULL.
CREATE FUNCTION dead_letters(p_schema text, p_topic text, p_since timestamptz,
                             p_until timestamptz, p_after_at timestamptz, p_after_schema text,
                             p_after_id bigint, p_limit integer)
RETURNS TABLE (schema_name text, id bigint, consumer text, topic text, kafka_partition integer,
               kafka_offset bigint, event_id uuid, reason text, headers jsonb, value bytea,
               created_at timestamptz, replayed_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    parts text[] := '{}';
    found record;
BEGIN
    FOR found IN
        SELECT n.nspname AS name,
               EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                       AND a.attname = 'replayed_at' AND NOT a.attisdropped) AS has_replayed
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relname = 'dead_letters' AND c.relkind = 'r'
          AND (p_schema IS NULL OR n.nspname = p_schema)
    LOOP
        parts := parts || format(
            'SELECT %L::text AS schema_name, id, consumer, topic, kafka_partition, kafka_offset, '
            'event_id, reason, headers, value, created_at, %s AS replayed_at FROM %I.dead_letters '
            'WHERE ($1::text IS NULL OR topic = $1) '
            'AND ($2::timestamptz IS NULL OR created_at >= $2) '
            'AND ($3::timestamptz IS NULL OR created_at < $3) '
            'AND ($4::timestamptz IS NULL OR (created_at, %L::text, id) > ($4, $5::text, $6::bigint)) '
            'ORDER BY created_at, id LIMIT $7',
            found.name, CASE WHEN found.has_replayed THEN 'replayed_at' ELSE 'NULL::timestamptz' END,
            found.name, found.name);
    END LOOP;
    IF cardinality(parts) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT * FROM ((' || array_to_string(parts, ') UNION ALL (') || ')) AS d '
        'ORDER BY created_at, schema_name, id LIMIT $7'
        USING p_topic, p_since, p_until, p_after_at, p_after_schema, p_after_id, p_limit;
END $$;
REVOKE ALL ON FUNCTION dead_letters(text, text, timestamptz, timestamptz, timestamptz, text, bigint, integer)
    FROM PUBLIC;
GRANT USAGE ON SCHEMA query TO intentledger_query_operator;
GRANT EXECUTE ON FUNCTION dead_letters(text, text, timestamptz, timestamptz, timestamptz, text, bigint, integer)
    TO intentledger_query_operator;
