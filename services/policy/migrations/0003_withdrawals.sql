-- Every withdrawal received (a CallWithdrawalRequested on ledger.approvals): applied, when its
-- signature proves the call's own proposer sent it while the call awaited approval (the call is
-- then denied `call_withdrawn`), or refused with the reason. Nothing here is ever updated.
CREATE TABLE withdrawals (
    event_id          uuid PRIMARY KEY,
    logical_call_id   uuid NOT NULL,
    principal_id      text NOT NULL,   -- whom the record names; counted only if proven
    outcome           text NOT NULL CHECK (outcome IN ('applied', 'refused')),
    reason_code       text,
    received_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    payload           jsonb NOT NULL
);
CREATE INDEX withdrawals_per_call ON withdrawals (logical_call_id, received_at);
