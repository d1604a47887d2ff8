-- Runs as the dispatcher sees them: the budget and deadline every attempt is checked against,
-- and whether a failed step has turned the run into a saga being compensated.
CREATE TABLE runs (
    run_id          text PRIMARY KEY,
    tenant_id       text NOT NULL,
    principal_id    text NOT NULL,
    deadline_at     timestamptz NOT NULL,
    max_attempts    integer NOT NULL,
    attempts_used   integer NOT NULL DEFAULT 0,
    aborted_at      timestamptz,
    abort_reason    text,
    work_until      timestamptz NOT NULL
    -- The run deadline, pushed later only by compensations (recovery has its own deadline).
);

-- The lease picks the one worker that may act on a run; fence advances on every takeover and
-- is stamped on every transition and request, so a worker that lost the lease is refused.
CREATE TABLE leases (
    run_id      text PRIMARY KEY REFERENCES runs (run_id),
    owner_id    text NOT NULL,
    fence       bigint NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

-- One row per logical call (and per compensation, which is a call of its own).
CREATE TABLE calls (
    logical_call_id     uuid PRIMARY KEY,
    run_id              text NOT NULL REFERENCES runs (run_id),
    operation_key       text NOT NULL UNIQUE,
    tool_name           text NOT NULL,
    tool_version        text NOT NULL,
    arguments_hash      text NOT NULL,
    canonical_arguments jsonb NOT NULL,
    principal_id        text NOT NULL,
    tenant_id           text NOT NULL,
    intent              jsonb NOT NULL,
    capability          jsonb,
    policy_version      text NOT NULL,
    state               text NOT NULL,
    version             bigint NOT NULL,
    fence               bigint NOT NULL DEFAULT 0,
    attempts            integer NOT NULL DEFAULT 0,
    lookups             integer NOT NULL DEFAULT 0,
    deadline_at         timestamptz NOT NULL,
    next_action_at      timestamptz,
    reason              text,
    result              jsonb,
    receipt_id          text,
    compensates         uuid REFERENCES calls (logical_call_id),
    succeeded_at        timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX calls_due ON calls (next_action_at) WHERE next_action_at IS NOT NULL;
CREATE INDEX calls_by_run ON calls (run_id);

-- Every attempt, recorded before it is sent; its outcome is filled in when known.
CREATE TABLE attempts (
    logical_call_id uuid NOT NULL REFERENCES calls (logical_call_id),
    attempt         integer NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('send', 'lookup')),
    fence           bigint NOT NULL,
    worker_id       text NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    deadline_at     timestamptz NOT NULL,
    status          text,
    detail          text,
    receipt         jsonb,
    finished_at     timestamptz,
    PRIMARY KEY (logical_call_id, attempt)
);

-- Writes refused because the writer's fence was no longer the run's: the evidence that a
-- stale worker tried, and was stopped.
CREATE TABLE stale_writes (
    id            bigserial PRIMARY KEY,
    run_id        text NOT NULL,
    worker_id     text NOT NULL,
    held_fence    bigint NOT NULL,
    current_fence bigint,
    action        text NOT NULL,
    at            timestamptz NOT NULL DEFAULT now()
);
