-- Proposal rates (services/proposal_intake/rates.py): one token bucket per tenant (principal_id
-- '') and one per principal of a tenant, shared by every intake replica.
CREATE TABLE rate_buckets (
    tenant_id     text NOT NULL,
    principal_id  text NOT NULL,
    tokens        double precision NOT NULL,
    refreshed_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, principal_id)
);
