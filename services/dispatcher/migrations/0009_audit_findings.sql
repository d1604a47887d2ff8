-- What the settled-call audit found (services/dispatcher/audit/): the operators' queue of drift
-- between the ledger and a downstream. A finding found again keeps its first_found_at; nothing
-- here changes a call: drift is never repaired by itself.
CREATE TABLE audit_findings (
    tool_name       text NOT NULL,
    operation_key   text NOT NULL,
    kind            text NOT NULL,
    logical_call_id uuid,
    ledger_state    text,
    effect_ids      text[] NOT NULL,
    first_found_at  timestamptz NOT NULL DEFAULT now(),
    last_found_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tool_name, operation_key, kind)
);
-- The audit's window over the calls the ledger settled as applied.
CREATE INDEX calls_applied_by_tool ON calls (tool_name, succeeded_at) WHERE succeeded_at IS NOT NULL;
