-- Every event has a tenant now (projection migration 0003), and a tenant sees only its own:
-- the clause that showed an event without a tenant to the tenant of a run of the same id let
-- whoever could write such an event put it into another tenant's timeline.
DROP POLICY query_tenant_rows ON projection.events;
CREATE POLICY query_tenant_rows ON projection.events FOR SELECT TO intentledger_query_tenant
    USING (tenant_id = current_setting('intentledger.tenant', true));
