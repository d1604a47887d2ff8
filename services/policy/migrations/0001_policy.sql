-- Every policy version that was ever in force, with the document it hashes. A decision names
-- its version (foreign key), so an audit can always read the rules that decided it.
CREATE TABLE policy_versions (
    version      text PRIMARY KEY,
    document     jsonb NOT NULL,
    activated_at timestamptz NOT NULL DEFAULT now()
);

-- One decision per logical call: the unique logical_call_id makes a redelivered intent a
-- no-op. A call awaiting approval later becomes allowed or denied, under a compare-and-swap
-- on version. Allowed rows are what rate and velocity limits count (by issued_at).
CREATE TABLE decisions (
    decision_id     uuid PRIMARY KEY,
    logical_call_id uuid NOT NULL UNIQUE,
    run_id          text NOT NULL,
    tenant_id       text NOT NULL,
    principal_id    text NOT NULL,
    tool_name       text NOT NULL,
    operation_key   text NOT NULL,
    arguments_hash  text NOT NULL,
    amount_minor    bigint,
    currency        text,
    outcome         text NOT NULL CHECK (outcome IN ('allowed', 'denied', 'awaiting_approval')),
    rule            text,
    policy_version  text NOT NULL REFERENCES policy_versions (version),
    reason_code     text,
    inputs          jsonb NOT NULL,   -- the intent, the usage read, the limits applied, approvals
    approval        jsonb,            -- while awaiting: the approval rule (quorum, approvers, ttl)
    issued_at       timestamptz NOT NULL,
    expires_at      timestamptz,      -- the capability's, or the approval request's
    capability      jsonb,
    version         bigint NOT NULL DEFAULT 1
);
CREATE INDEX decisions_allowed_per_tenant ON decisions (tenant_id, issued_at) WHERE outcome = 'allowed';
CREATE INDEX decisions_allowed_per_principal ON decisions (principal_id, issued_at) WHERE outcome = 'allowed';
CREATE INDEX decisions_awaiting_by_expiry ON decisions (expires_at) WHERE outcome = 'awaiting_approval';

-- Every approval received: counted, refused (with the reason) or repeated (an approver who
-- already counts). Nothing here is ever updated.
CREATE TABLE approvals (
    approval_event_id uuid PRIMARY KEY,
    logical_call_id   uuid NOT NULL,
    approver_id       text NOT NULL,
    decision          text NOT NULL CHECK (decision IN ('granted', 'refused')),
    outcome           text NOT NULL CHECK (outcome IN ('counted', 'refused', 'repeated')),
    reason_code       text,
    decided_at        timestamptz NOT NULL,
    expires_at        timestamptz,
    received_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    payload           jsonb NOT NULL
);
CREATE INDEX approvals_per_call ON approvals (logical_call_id, received_at);
