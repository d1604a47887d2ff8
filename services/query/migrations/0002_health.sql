-- The console's health charts (issue 9) are operators' only: relay backlog and consumer lag
-- belong to the deployment, not to a tenant, so the tenant role gets no grant at all.
GRANT SELECT ON projection.health_samples TO intentledger_query_operator;
