-- A run is created by its first proposal; its limits bound everything proposed in it.
CREATE TABLE runs (
    run_id           text PRIMARY KEY,
    tenant_id        text NOT NULL,
    principal_id     text NOT NULL,
    deadline_at      timestamptz NOT NULL,
    max_calls        integer NOT NULL,
    max_attempts     integer NOT NULL,
    cost_limit_minor bigint,
    currency         text,
    call_count       integer NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now()
);

-- One row per business intent. The unique operation key IS the idempotency record: it is
-- durable before ProposalAccepted is emitted, so nothing downstream can act on an intent that
-- a crash could forget. Keys are retained as long as the row (no expiry yet: see README).
CREATE TABLE logical_calls (
    logical_call_id     uuid PRIMARY KEY,
    operation_key       text NOT NULL UNIQUE,
    run_id              text NOT NULL REFERENCES runs (run_id),
    provider            text NOT NULL,
    provider_call_id    text NOT NULL,
    tool_name           text NOT NULL,
    tool_version        text NOT NULL,
    arguments_hash      text NOT NULL,
    canonical_arguments jsonb NOT NULL,
    principal_id        text NOT NULL,
    tenant_id           text NOT NULL,
    state               text NOT NULL,
    version             bigint NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, provider_call_id)
);
