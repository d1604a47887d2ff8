-- The event history: every ledger event, once (the event id is the key), never updated or
-- deleted. Everything else in this schema is derived from it and can be rebuilt by replay.
CREATE TABLE events (
    event_id        uuid PRIMARY KEY,
    position        bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    topic           text NOT NULL,
    event_type      text NOT NULL,
    run_id          text NOT NULL,
    tenant_id       text,
    logical_call_id uuid,
    principal_id    text,
    policy_version  text,
    worker_id       text,
    fence           bigint,
    attempt         integer,
    receipt_id      text,
    trace_id        text,
    occurred_at     timestamptz NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    envelope        jsonb NOT NULL
);
CREATE INDEX events_by_run ON events (run_id, position);
CREATE INDEX events_by_call ON events (logical_call_id, position) WHERE logical_call_id IS NOT NULL;

-- Read model of calls: one row per logical call, at the highest version seen.
CREATE TABLE calls (
    logical_call_id  uuid PRIMARY KEY,
    run_id           text NOT NULL,
    tenant_id        text NOT NULL,
    principal_id     text NOT NULL,
    provider_call_id text,
    operation_key    text,
    tool_name        text,
    tool_version     text,
    arguments_hash   text,
    state            text NOT NULL,
    version          bigint NOT NULL,
    reason           text,
    policy_version   text,
    worker_id        text,
    fence            bigint,
    attempts         integer NOT NULL DEFAULT 0,
    receipt_id       text,
    result           jsonb,
    compensates      uuid,
    unknown_since    timestamptz,
    updated_at       timestamptz NOT NULL,
    -- The call's composite monotonic version is (stage, version, last_event_id): stage 1 intake,
    -- 2 policy, 3 dispatcher; version is that stage's own (the dispatcher's version at stage 3);
    -- last_event_id is the event that set the state (and breaks ties between distinct events).
    stage            smallint NOT NULL CHECK (stage BETWEEN 1 AND 3),
    last_event_id    uuid NOT NULL
);
CREATE INDEX calls_by_run ON calls (run_id);
CREATE INDEX calls_by_state ON calls (tenant_id, state);

-- Read model of runs, derived from their calls.
CREATE TABLE runs (
    run_id        text PRIMARY KEY,
    tenant_id     text NOT NULL,
    principal_id  text NOT NULL,
    status        text NOT NULL,
    calls         integer NOT NULL DEFAULT 0,
    stop_reason   text,
    updated_at    timestamptz NOT NULL,
    rejected_proposals integer NOT NULL DEFAULT 0,
    -- sha256 of the run's canonical calls and run rows (services/projection/hashing.py), as
    -- computed by reducer_version: `intentledger replay --verify` recomputes and compares it.
    projection_hash    text NOT NULL,
    reducer_version    text NOT NULL
);
CREATE INDEX runs_by_tenant ON runs (tenant_id, updated_at);
