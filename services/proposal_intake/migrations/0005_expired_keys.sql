-- An intent's record past its tool's ledger_key_retention_seconds is reduced to this tombstone
-- (services/proposal_intake/expiry.py), in the statement that deletes the record. The key stays
-- taken for ever: a proposal under it is refused operation_key_expired and never becomes a
-- second effect. The canonical arguments, the provider's ids and the hash are gone.
CREATE TABLE expired_keys (
    operation_key   text PRIMARY KEY,
    logical_call_id uuid NOT NULL,
    tenant_id       text NOT NULL,
    run_id          text NOT NULL,
    tool_name       text NOT NULL,
    proposed_at     timestamptz NOT NULL,
    expired_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX logical_calls_by_age ON logical_calls (tool_name, created_at);
